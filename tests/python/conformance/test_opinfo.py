"""OpInfo conformance in `make test`: a few samples per (OpInfo, dtype) for every op kiln
generates kernels for (`make conformance` runs all of them)."""

import pathlib
import sys

import kiln

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import opinfo_conformance  # noqa: E402

SAMPLES_PER_ROW = 4


def test_every_native_op_has_opinfos():
    missing = sorted(set(kiln._C.native_ops()) - set(opinfo_conformance.OPINFOS_FOR))
    assert not missing, f"native ops without OpInfo conformance: {missing}"


def test_opinfo_samples_match_eager():
    results = opinfo_conformance.run(max_samples=SAMPLES_PER_ROW)
    failures = [f"{key}: {f}" for key, (_, _, _, fs) in results.items() for f in fs]
    assert not failures, "\n".join(failures[:20])
    names = {n for ops in opinfo_conformance.OPINFOS_FOR.values() for n in ops}
    ran = {key[0] for key, (samples, passed, _, _) in results.items()
           if key[2] == "float32" and passed > 0}
    assert names <= ran, f"OpInfos with no passing float32 sample: {sorted(names - ran)}"
    assert sum(r[2] for r in results.values()) > 0.3 * sum(r[0] for r in results.values())
