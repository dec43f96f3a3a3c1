"""bench/compile.py's train-step children (also bench/attention.py's and
bench/distributed.py's): each reports the parameters its optimizer holds, and
train_steps refuses to compare two devices whose parameters differ, naming
both; and a train step's ratio is met only where the two devices' final
losses agree too. (A plugin whose Module.to() untied a GPT-2 model's shared
weights once gave cudadev one parameter more than cuda, and the ratio
compared two models, whose losses differed by 2.4%.) The children here are stand-ins speaking the same protocol, so the
check runs without a GPU; the benchmarks' own children run on the GPU machine."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def run_train_steps(tmp_path, parameters: dict, losses: dict | None = None) -> subprocess.CompletedProcess:
    losses = losses or {"cuda": 0.5, "cudadev": 0.5}
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(f"""
        import json, sys, time
        device = sys.argv[sys.argv.index("--child-device") + 1]
        def reply(**message):
            print("@@devbridge-bench " + json.dumps(message), flush=True)
        reply(ready_at=time.time(), first_step_ms=1.0, parameters={parameters!r}[device])
        for request in sys.stdin:
            if request.strip() == "sample":
                reply(ms=2.0 if device == "cuda" else 2.5)
            else:
                reply(loss=json.loads({json.dumps(losses)!r})[device])
                break
    """))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(BENCH)!r})
        import compile
        results = compile.train_steps("mlp", 2, 1, devices=("cuda", "cudadev"), script={str(child)!r})
        print("RESULTS " + json.dumps({{d: r["samples"] for d, r in results.items()}}))
        ratio = compile.train_ratio_row("MLP, train step: ratio cudadev/cuda", results, 1.3)
        print("RATIO " + json.dumps({{k: ratio[k] for k in ("value", "target_met", "loss_difference")}}))
        print("TABLE " + compile.table([ratio], {{"gpu": "-", "torch": "-", "triton": "-", "commit": "-"}}).split("\\n")[4])
    """)
    env = {**os.environ, "DEVBRIDGE_BENCH_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_the_same_parameters_on_both_devices_are_sampled(tmp_path):
    result = run_train_steps(tmp_path, {"cuda": [76, 49_000_000], "cudadev": [76, 49_000_000]})
    assert result.returncode == 0, result.stderr
    assert 'RESULTS {"cuda": [2.0, 2.0], "cudadev": [2.5, 2.5]}' in result.stdout


def test_different_parameters_are_refused_naming_both_devices(tmp_path):
    result = run_train_steps(tmp_path, {"cuda": [76, 49_000_000], "cudadev": [77, 55_300_000]})
    assert result.returncode != 0
    assert "cuda: 76 tensors, 49000000 elements" in result.stderr
    assert "cudadev: 77 tensors, 55300000 elements" in result.stderr
    assert "_has_compatible_shallow_copy_type" in result.stderr


def ratio_of(result: subprocess.CompletedProcess) -> tuple[dict, str]:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    ratio = json.loads(next(line for line in lines if line.startswith("RATIO "))[6:])
    return ratio, next(line for line in lines if line.startswith("TABLE "))


def test_a_ratio_within_its_target_with_agreeing_losses_is_met(tmp_path):
    ratio, line = ratio_of(run_train_steps(tmp_path, {"cuda": [4, 100], "cudadev": [4, 100]},
                                           {"cuda": 0.05576, "cudadev": 0.05585}))
    assert ratio["value"] == 1.25 and ratio["target_met"], ratio
    assert line.endswith("| <= 1.3 | met |"), line


def test_a_ratio_between_devices_whose_losses_differ_is_not_met_and_says_why(tmp_path):
    ratio, line = ratio_of(run_train_steps(tmp_path, {"cuda": [4, 100], "cudadev": [4, 100]},
                                           {"cuda": 0.05584, "cudadev": 0.05449}))
    assert ratio["value"] == 1.25 and not ratio["target_met"], ratio
    assert "NOT MET (final losses differ by 2.4% (0.05584 on cuda, 0.05449 on cudadev): not the same program)" in line


def test_a_nan_loss_is_not_met(tmp_path):
    ratio, _ = ratio_of(run_train_steps(tmp_path, {"cuda": [4, 100], "cudadev": [4, 100]},
                                        {"cuda": 0.5, "cudadev": float("nan")}))
    assert not ratio["target_met"], ratio
