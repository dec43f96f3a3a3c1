"""The DLPack import fuzz target (tests/fuzz/) on a fixed corpus, so every CI
run exercises it without a fuzzing engine: the hand-written cases, 200 mostly
well-formed random inputs and 100 raw random byte strings, all from fixed
seeds (fuzz_inputs.smoke_corpus). tests/fuzz/run.sh is the open-ended version.

The corpus is replayed in a child process (tests/fuzz/replay_corpus.py): an
importer that crashes takes only the child down, and the test names the input
that did it. After a crash the replay resumes at the next input, so one bad
case does not hide the others.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import torch

FUZZ_DIR = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))

from fuzz_inputs import NAMED_SEEDS, decode, smoke_corpus  # noqa: E402

pytestmark = pytest.mark.skipif(
    torch._C._get_privateuse1_backend_name() != "simdev",
    reason="torch_simdev is not installed (kDLExtDev inputs need it): "
    "pip install --no-build-isolation plugins/simdev",
)

# Cases that must come out one way, whatever else the importer does.
MUST_IMPORT = {"cpu_float32_vector", "simdev0_float32_matrix", "simdev1_float32_vector",
               "cpu_scalar_null_arrays", "cpu_transposed_strides", "cpu_zero_size_null_data",
               "cpu_byte_offset_aligned", "cpu_read_only_flag", "float8_e4m3fn"}  # fmt: skip
MUST_REJECT = {"major_2_must_be_rejected", "major_0_must_be_rejected", "null_shape_with_ndim_2",
               "negative_ndim", "huge_ndim_null_arrays", "ndim_257_null_arrays", "negative_extent",
               "storage_size_overflow", "extent_int64_min", "byte_offset_not_element_multiple",
               "unknown_device_type_99", "negative_device_type", "extdev_negative_device_id",
               "extdev_device_id_256_wraps_int8", "extdev_device_id_past_count", "float_bits_7",
               "float32_two_lanes", "zero_lanes", "unknown_dtype_code_255",
               "float4_padded_subbyte"}  # fmt: skip


def replay(table: str = "devbridge") -> dict[str, dict]:
    """label -> result record; a crashed input gets outcome "crashed"."""
    corpus = smoke_corpus()
    results: dict[str, dict] = {}
    start = 0
    while start < len(corpus):
        child = subprocess.run(
            [sys.executable, str(FUZZ_DIR / "replay_corpus.py"), "--table", table, "--start", str(start)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        last_started = None
        for line in child.stdout.splitlines():
            record = json.loads(line)
            if "start" in record:
                last_started = record["start"]
            else:
                results[record["label"]] = record
        if child.returncode == 0:
            break
        if last_started is None or corpus[last_started][0] in results:
            raise RuntimeError(f"the replay failed before any input:\n{child.stderr[-3000:]}")
        label, data = corpus[last_started]
        detail = "\n".join(line for line in child.stderr.splitlines() if not line.startswith("frame #"))
        results[label] = {"label": label, "outcome": "crashed", "candidate": repr(decode(data)),
                          "detail": f"exit status {child.returncode}:\n{detail[-2000:]}"}  # fmt: skip
        start = last_started + 1
    return results


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    return replay()


def describe(record: dict) -> str:
    return f"{record['label']} {record.get('candidate', '')}: {record['outcome']}\n{record['detail']}"


@pytest.mark.parametrize("name", sorted(NAMED_SEEDS))
def test_named_case(results, name):
    record = results[f"named:{name}"]
    assert record["outcome"] in ("imported", "rejected"), describe(record)
    if name in MUST_IMPORT:
        assert record["outcome"] == "imported", describe(record)
    if name in MUST_REJECT:
        assert record["outcome"] == "rejected", describe(record)


@pytest.mark.parametrize("kind", ["well_formed", "raw"])
def test_random_inputs(results, kind):
    records = [r for label, r in results.items() if label.startswith(f"{kind}:")]
    bad = [r for r in records if r["outcome"] not in ("imported", "rejected")]
    assert not bad, f"{len(bad)} of {len(records)} inputs failed:\n\n" + "\n\n".join(
        describe(r) for r in bad[:5]
    )
    if kind == "well_formed":  # both paths exercised, or the corpus went degenerate
        imported = sum(r["outcome"] == "imported" for r in records)
        assert imported >= 50 and len(records) - imported >= 20, f"{imported} of {len(records)} imported"
