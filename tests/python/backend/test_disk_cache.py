"""The disk cache of compiled code across processes (docs/disk-cache.md): a second process loads
what the first compiled, with the same results; both entry points use it; KILN_CACHE=0 keeps
nothing; an unsafe directory is refused."""

import json
import os

from child import run_child

# Compiles one small model through `entry` (torch.compile or the TorchScript path) and prints
# what kiln's counters and cache say, and the result.
_CODE = """
import json, torch, kiln
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                            torch.nn.Linear(32, 4)).eval()
x = torch.randn(3, 16)
with torch.no_grad():
    if {entry!r} == "torch.compile":
        compiled = torch.compile(model, backend="kiln")
    else:
        compiled = kiln.compile(torch.jit.trace(model, (x,)))
    out = compiled(x)
    assert torch.allclose(out, model(x), atol=1e-5, rtol=1e-4)
    explained = json.loads(compiled.explain(x)) if {entry!r} == "torchscript" else None
s = kiln.stats()
print(json.dumps({{"hits": s["disk_cache_hits"], "misses": s["disk_cache_misses"],
                  "compiled": s["modules_compiled"], "loaded": s["modules_loaded"],
                  "graphs_loaded": s["graphs_loaded"],
                  "out": out.flatten().tolist(), "info": kiln.cache_info(),
                  "explained": explained and [explained["disk_cache_hits"],
                                              explained["disk_cache_misses"]]}}))
"""


def _run(entry: str, cache_dir, **env) -> dict:
    code = _CODE.format(entry=entry)
    return json.loads(run_child(code, env={"KILN_CACHE_DIR": str(cache_dir), **env}).splitlines()[-1])


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    for entry in ("torch.compile", "torchscript"):
        cache = tmp_path / entry
        first = _run(entry, cache)
        assert first["misses"] > 0 and first["hits"] == 0, first
        assert first["info"]["enabled"] and first["info"]["entries"] > 0, first["info"]
        second = _run(entry, cache)
        assert second["hits"] == first["misses"] and second["misses"] == 0, (first, second)
        assert second["out"] == first["out"]  # bit for bit: the same code ran
        # Entries are code modules and optimized graphs (the graph passes skipped).
        assert second["compiled"] == 0 and second["loaded"] == first["compiled"] > 0
        assert second["graphs_loaded"] > 0 and first["graphs_loaded"] == 0
        if entry == "torchscript":  # explain says it too, per code module
            assert first["explained"] == [0, first["compiled"]], first
            assert second["explained"] == [second["loaded"], 0], second
        assert second["info"]["entries"] == first["info"]["entries"]


def test_kiln_cache_0_keeps_nothing(tmp_path):
    result = _run("torch.compile", tmp_path / "off", KILN_CACHE="0")
    assert result["hits"] == result["misses"] == 0
    assert not result["info"]["enabled"] and "KILN_CACHE=0" in result["info"]["why_disabled"]
    assert not (tmp_path / "off").exists()  # not even created


def test_a_directory_others_can_write_is_refused_with_a_warning(tmp_path):
    shared = tmp_path / "shared"
    (shared / "objects").mkdir(parents=True)
    os.chmod(shared, 0o777)
    code = _CODE.format(entry="torch.compile")
    out = run_child(code, env={"KILN_CACHE_DIR": str(shared), "KILN_LOG": "warn"}, stderr=True)
    result = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert not result["info"]["enabled"] and result["hits"] == result["misses"] == 0
    assert "writable by other users" in out and "disk cache is off" in out
    assert not os.listdir(shared / "objects")


def test_cache_info_and_clear_cache(tmp_path):
    code = """
import json, torch, kiln
model = torch.nn.Linear(8, 8).eval()
with torch.no_grad():
    torch.compile(model, backend="kiln")(torch.randn(2, 8))
before = kiln.cache_info()
kiln.clear_cache()
print(json.dumps([before, kiln.cache_info()]))
"""
    before, after = json.loads(
        run_child(code, env={"KILN_CACHE_DIR": str(tmp_path / "c")}).splitlines()[-1])
    assert before["entries"] > 0 and before["bytes"] > 0 and before["max_bytes"] == 1024 << 20
    assert before["dir"] == str(tmp_path / "c")
    assert after["entries"] == 0 and after["bytes"] == 0
