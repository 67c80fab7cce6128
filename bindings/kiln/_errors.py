"""kiln's one Python exception type (C++ kiln::Error arrives as this)."""


class KilnError(RuntimeError):
    """An error from kiln. ``kind`` is one of "invalid input" (the caller's mistake: a bad option,
    input or argument), "unsupported", "internal" (a kiln bug) or "backend" (LLVM failed)."""

    def __init__(self, message: str, kind: str = "invalid input"):
        super().__init__(message)
        self.kind = kind
