"""torch.compile on cudadev: Inductor's Triton kernels compiled by NVIDIA's
compiler for the plugin's target and launched by devbridge on the current
cudadev stream. Every case is compared with eager cudadev and with
torch.compile on cuda, on the same inputs, in the same process, which also
compiles for cuda with NVIDIA's own driver."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

pytestmark = pytest.mark.gpu

triton = pytest.importorskip("triton", reason="triton is not installed")

import devbridge  # noqa: E402
import devbridge.inductor  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "tests" / "python"))
import compile_cases as cases  # noqa: E402

SPIN_MS = 200


@pytest.fixture(scope="module", autouse=True)
def registered(tmp_path_factory):
    cache = tmp_path_factory.mktemp("inductor-cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(cache / "triton")
    devbridge.inductor.register()
    yield


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield


def both(fn, inputs, **options):
    """(compiled on cudadev, eager on cudadev, compiled on cuda, generated cudadev code)."""
    on_plugin = cases.to(inputs, "cudadev")
    compiled, code = run_and_get_code(torch.compile(fn, fullgraph=True, **options), *on_plugin)
    eager = fn(*on_plugin)
    torch._dynamo.reset()
    on_cuda = torch.compile(fn, fullgraph=True, **options)(*cases.to(inputs, "cuda"))
    return compiled, eager, on_cuda, "\n".join(code)


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_compiled_function_matches_eager_and_cuda(case):
    compiled, eager, on_cuda, code = both(case.fn, case.inputs())
    cases.assert_close(compiled, eager, case.atol, case.rtol)
    cases.assert_close(compiled, on_cuda, case.atol, case.rtol)
    assert "@triton.jit" in code and "current_stream as get_raw_stream" in code


def test_gpt_block_at_realistic_sizes_forward_and_backward():
    torch.backends.cuda.matmul.allow_tf32 = False
    eager_model = cases.Block(width=768, heads=12).to("cudadev")
    model = cases.Block(width=768, heads=12).to("cudadev")
    model.load_state_dict(eager_model.state_dict())
    cuda_model = cases.Block(width=768, heads=12).to("cuda")
    cuda_model.load_state_dict({k: v.to("cuda") for k, v in eager_model.state_dict().items()})
    x = cases._randn(4, 256, 768, seed=7)
    out = torch.compile(model)(x.to("cudadev"))
    expected = eager_model(x.to("cudadev"))
    with torch.no_grad():  # torch.cuda's autograd beside a PrivateUse1 backend trips PyTorch (see below)
        on_cuda = torch.compile(cuda_model)(x.to("cuda"))
    cases.assert_close(out, expected, 2e-3, 2e-3)
    cases.assert_close(out, on_cuda, 2e-3, 2e-3)
    # Backward against eager cudadev only: torch.cuda's backward beside a
    # PrivateUse1 backend trips PyTorch's autograd engine (the xfail in
    # test_cudadev_ops.py), whatever compiles it.
    out.square().mean().backward()
    expected.square().mean().backward()
    for p, e in zip(model.parameters(), eager_model.parameters()):
        cases.assert_close(p.grad, e.grad, 2e-3, 2e-3)


def test_mlp_training_step_matches_eager():
    torch.manual_seed(0)
    eager_model, model = cases.MLP().to("cudadev"), cases.MLP().to("cudadev")
    model.load_state_dict(eager_model.state_dict())
    eager_opt = torch.optim.AdamW(eager_model.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step = torch.compile(cases.train_step)
    x, target = cases.to((cases._randn(64, 32, seed=1), cases._randn(64, 32, seed=2)), "cudadev")
    for _ in range(3):
        cases.assert_close(step(model, opt, x, target), cases.train_step(eager_model, eager_opt, x, target),
                           1e-5, 1e-5)


def test_max_autotune_compiles_mm_to_a_triton_template_as_on_cuda():
    """Under max-autotune with Triton the only GEMM backend, Inductor builds
    the mm from its Triton template with the configs its template registry
    holds for cuda; cudadev's compiler targets Triton's cuda backend, so it
    takes the same configs (without them the template had no config to
    offer), and the mm compiles to a template kernel on both devices."""
    from torch._inductor import config

    a, b = cases._randn(256, 512, seed=3).half(), cases._randn(512, 384, seed=4).half()
    with config.patch(max_autotune_gemm=True, max_autotune_gemm_backends="TRITON"):
        compiled, eager, on_cuda, code = both(torch.mm, (a, b))
    assert "triton_tem_" in code and "current_stream as get_raw_stream" in code
    assert any("template" in line for line in devbridge.inductor.patched_torch_apis())
    cases.assert_close(compiled, eager, 1e-2, 1e-2)
    cases.assert_close(compiled, on_cuda, 1e-2, 1e-2)


def test_compiled_kernels_run_after_a_spin_on_the_callers_stream():
    n = 1 << 22
    compiled = torch.compile(lambda x: x * 2.0 + 1.0, fullgraph=True)
    stream = torch.Stream(device="cudadev:0")
    with stream:
        x = torch.ones(n, device="cudadev")
        compiled(x)  # compiled and loaded before the spin
        torch.accelerator.synchronize()
        torch.cudadev._sleep_on_current_stream(SPIN_MS)
        x.fill_(5.0)  # after the spin; a kernel on another stream would read 1.0
        out = compiled(x)
        assert torch.all(out.cpu() == 11.0)


def test_the_autotuners_benchmarker_times_cudadev_work_on_its_stream():
    """Inductor's autotuner times each config of a kernel with the process's
    benchmarker, while devbridge's Triton driver is active (driver_routing).
    Work on a cudadev stream must time as long as it runs: timed with events
    on torch.cuda's stream (torch 2.11's InductorBenchmarker, untouched), a
    2 ms spin on cudadev's non-blocking stream reads as next to nothing, and
    every config of a plugin kernel would look equally fast."""
    from torch._inductor.runtime.benchmarking import benchmarker

    def spin():
        torch.cudadev._sleep_on_current_stream(2.0)

    devbridge.triton.activate()
    try:
        ms = benchmarker.benchmark(spin, device="cudadev", rep=40, is_vetted_benchmarking=True)
    finally:
        devbridge.triton.deactivate()
    assert 1.5 < ms < 20, ms


def test_two_host_threads_on_their_own_streams():
    compiled = torch.compile(cases.pointwise_chain, fullgraph=True)
    x, y = cases._randn(1 << 20), cases._randn(1 << 20, seed=1)
    expected = cases.pointwise_chain(x.to("cudadev"), y.to("cudadev"))
    compiled(x.to("cudadev"), y.to("cudadev"))
    errors, results = [], {}

    def worker(index):
        try:
            with torch.Stream(device="cudadev:0"):
                if index == 0:
                    torch.cudadev._sleep_on_current_stream(SPIN_MS)
                results[index] = compiled(x.to("cudadev"), y.to("cudadev")).cpu()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for index in range(2):
        cases.assert_close(results[index], expected, 1e-5, 1e-5)


def test_cuda_kernels_keep_nvidias_driver_in_the_same_process(monkeypatch):
    """Kernels for cudadev load through devbridge's driver, kernels for cuda
    through NVIDIA's, compiled alternately in one process."""
    from devbridge.triton.backend import driver as devbridge_driver

    loaded = []
    original = devbridge_driver.DevbridgeUtils.load_binary

    def recording(self, name, kernel, shared, device):
        loaded.append(name)
        return original(self, name, kernel, shared, device)

    monkeypatch.setattr(devbridge_driver.DevbridgeUtils, "load_binary", recording)
    x = cases._randn(4096)
    for attempt in range(2):
        torch._dynamo.reset()
        on_cuda_fn = torch.compile(lambda t: t.cos() * 3.0)
        on_cuda = on_cuda_fn(x.to("cuda"))
        on_plugin = torch.compile(lambda t: t.sin() + 2.0)(x.to("cudadev"))
        actual, expected = on_cuda.cpu(), x.cos() * 3.0
        if not torch.allclose(actual, expected, atol=1e-5, rtol=1e-5):
            # Seen once on an H200 (45% of elements off by up to 1.5e-4 relative),
            # not explained yet: say which side is off, and whether a second call agrees.
            worst = int((actual - expected).abs().argmax())
            again = on_cuda_fn(x.to("cuda")).cpu()[worst].item()
            eager = (x.to("cuda").cos() * 3.0).cpu()[worst].item()
            pytest.fail(f"round {attempt}: compiled cos on cuda is off at [{worst}]: x={x[worst].item()!r}, "
                        f"compiled {actual[worst].item()!r}, compiled again {again!r}, eager cuda "
                        f"{eager!r}, cpu {expected[worst].item()!r}; kernels through devbridge: {loaded}")
        cases.assert_close(on_plugin, x.sin() + 2.0, 1e-5, 1e-5)
    assert any("sin" in name for name in loaded), loaded
    assert not any("cos" in name for name in loaded), loaded


def test_compile_workers_load_cudadev_themselves(tmp_path):
    """Autoload is off on this machine (two plugins installed): the workers
    load cudadev from the first lines of each kernel module."""
    script = tmp_path / "workers.py"
    script.write_text(textwrap.dedent("""
        import torch, torch_cudadev
        import torch._inductor.config as config
        config.compile_threads = 4
        from torch._inductor.async_compile import AsyncCompile
        AsyncCompile.use_process_pool(); AsyncCompile.wait_pool_ready(timeout=300)
        x = torch.randn(64, 300)
        f = lambda t: torch.softmax(t * 2.0, dim=-1).sum(0)
        out = torch.compile(f, fullgraph=True)(x.to("cudadev"))
        torch.testing.assert_close(out.cpu(), f(x), atol=1e-5, rtol=1e-5)
        print("ok")
    """))
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "i"),
               TRITON_CACHE_DIR=str(tmp_path / "t"))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-6000:]
