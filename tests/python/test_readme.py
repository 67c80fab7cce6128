"""README.md is for users: short, undated, and every usage block in it is a verbatim excerpt of
an example that make test runs (a tag `<!-- from PATH -->` on the line before the block names
the file), so the README cannot drift from code that works."""
import pathlib
import re
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TAG = re.compile(r"<!-- from (\S+) -->\n```(\w+)\n(.*?)\n```", re.S)
USAGE_LANGUAGES = {"python", "cpp", "cmake"}
# The examples make test runs: examples/python/*.py (test_examples.py) and the C++ app
# (test_example_app.py), which builds examples/hello.
RUN_BY_TESTS = re.compile(r"examples/(python/[^/]+\.py|hello/(main\.cpp|CMakeLists\.txt))$")


def _blocks(language=None):
    return [m for m in re.finditer(r"```(\w*)\n(.*?)\n```", README, re.S)
            if language is None or m.group(1) == language]


def _is_excerpt(block: str, source: str) -> bool:
    """True when the block's lines are consecutive lines of `source`, up to a common indent."""
    wanted = block.splitlines()
    lines = source.splitlines()
    for start in range(len(lines) - len(wanted) + 1):
        piece = "\n".join(lines[start:start + len(wanted)])
        if textwrap.dedent(piece) == "\n".join(wanted):
            return True
    return False


def test_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300


def test_readme_has_no_dates_or_issue_numbers():
    found = re.findall(r"#[0-9]+|issue ?[0-9]|20[0-9]{2}-[0-9]{2}-[0-9]{2}", README)
    assert not found, found


def test_every_usage_block_is_tagged_with_its_example():
    usage = [m for m in _blocks() if m.group(1) in USAGE_LANGUAGES]
    assert usage, "the README shows no usage"
    tagged_blocks = {m.group(3) for m in TAG.finditer(README)}
    untagged = [m.group(2)[:60] for m in usage if m.group(2) not in tagged_blocks]
    assert not untagged, f"usage blocks without a `<!-- from PATH -->` tag: {untagged}"


def test_a_changed_line_is_no_excerpt():
    source = "int main() {\n  int a = 1;\n  int b = 2;\n}\n"
    assert _is_excerpt("int a = 1;\nint b = 2;", source)
    assert not _is_excerpt("int a = 1;\nint b = 3;", source)
    assert not _is_excerpt("int b = 2;\nint a = 1;", source)


def test_each_tagged_block_is_an_excerpt_of_an_example_the_tests_run():
    matches = list(TAG.finditer(README))
    assert matches
    for m in matches:
        path, block = m.group(1), m.group(3)
        assert RUN_BY_TESTS.search(path), f"{path} is not an example make test runs"
        source = ROOT / path
        assert source.exists(), f"README quotes {path}, which does not exist"
        assert _is_excerpt(block, source.read_text()), (
            f"the README block tagged {path} is no longer an excerpt of it:\n{block}")


def test_relative_links_in_readme_and_docs_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+://", path):
                continue
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
