"""libkiln.so exports its public API and the internal interface kiln's CLI and Python extension
use, nothing else (docs/architecture.md, "What libkiln.so exports"), and each process holds one
copy of kiln's core: the C++ tests link the layers' objects instead of the library."""

import re
import subprocess

import pytest

# The public API (backend/include/kiln) and the internal interface (KILN_INTERNAL), as the
# demangled names of kiln's exported functions and classes start.
PUBLIC = ("kiln::compile(", "kiln::unwrap(", "kiln::stats(", "kiln::reset_stats(",
          "kiln::target_name(", "kiln::precision_name(", "kiln::runs_in_name(",
          "kiln::CompileOptions::",
          "kiln::CompiledModule::", "kiln::Explanation::", "kiln::Error",
          "kiln::start_profiling(", "kiln::finish_profiling(", "kiln::Profile::",
          "kiln::cache_info(", "kiln::clear_cache(", "kiln::CacheInfo::", "kiln::save(",
          "kiln::load(")
INTERNAL = ("kiln::FxProgram::", "kiln::SizeExpression::", "kiln::RegionRunner::",
            "kiln::fx_region(", "kiln::find_operator(", "kiln::operator_problem(",
            "kiln::is_tensor_type(", "kiln::is_optional_tensor_type(",
            "kiln::is_tensor_list_type(", "kiln::is_optional_tensor_list_type(",
            "kiln::pass_names[", "kiln::native_ops[", "kiln::cuda_status(", "kiln::joined(",
            "kiln::native_bf16(", "kiln::build_id[", "kiln::load_cache_entry(",
            "kiln::store_cache_entry(")
MAX_EXPORTS = 264  # each ATen op kiln registers adds its signature's typeinfo (and its name)


def _exports(path, dynamic=True) -> list[str]:
    """The demangled symbols `path` defines: those it exports, or (dynamic=False) all of them."""
    args = ["nm", "--defined-only", "-C"] + (["-D"] if dynamic else [])
    out = subprocess.run(args + [str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]


def _needed(path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


@pytest.fixture(scope="module")
def exports(build_dir):
    library = build_dir / "backend" / "libkiln.so"
    assert library.exists(), f"{library} not built; run `make build`"
    return _exports(library)


def test_libkiln_exports_few_symbols_and_no_llvm(exports):
    assert 0 < len(exports) <= MAX_EXPORTS, len(exports)
    assert not [s for s in exports if "llvm::" in s]


def test_every_exported_kiln_function_is_public_or_internal_interface(exports):
    # Functions and members defined by kiln; typeinfo, vtables and template instantiations of
    # torch's and the standard library's types (vague linkage, default visibility in their own
    # headers) are not kiln's interface.
    kiln_symbols = [s for s in exports if s.startswith("kiln::")]
    stray = [s for s in kiln_symbols if not s.startswith(PUBLIC + INTERNAL)]
    assert kiln_symbols and stray == [], stray
    # The core stays hidden: the graph IR, the passes, the executor, the code generators.
    assert not [s for s in exports if re.match(r"kiln::(ir|kernel|codegen|cuda)::", s)]


def test_one_copy_of_the_core_per_process(build_dir):
    # kiln's C++ tests link the layers' objects and never load libkiln.so; kiln._C and the CLI
    # load it and hold no copy of their own.
    for test in ("kiln_tests", "kiln_fuzz_tests"):
        path = build_dir / "tests" / test
        if path.exists():
            assert "libkiln.so" not in _needed(path), test
    extension = next((build_dir / "python" / "kiln").glob("_C*.so"))
    for program in (extension, build_dir / "kiln"):
        assert "libkiln.so" in _needed(program), program
        defined = _exports(program, dynamic=False)
        assert not [s for s in defined if s.startswith("kiln::ir::Graph::")], program
