"""devbridge's host Triton target on a plugin that knows nothing of devbridge's
runtime: hostplug (tests/plugins/hostplug), a minimal PrivateUse1 backend
written as a third party writes one (torch and c10 APIs only; its package
calls devbridge.install() and declare_hardware(compiler="interpreter",
kernel_runtime="host"), as docs/plugin-authors.md §2 and §6 ask).

hostplug owns PrivateUse1 in its process, and the test process has simdev
(autoloaded), so every scenario runs in a fresh interpreter with
TORCH_DEVICE_BACKEND_AUTOLOAD=0 and prints a JSON dict of what it saw. Its
streams are asynchronous and its delay knob (torch.hostplug.set_op_delay_us)
holds each queued operator back, so missing ordering shows up as wrong data;
the first scenario proves the knob really delays.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

PLUGIN = pathlib.Path(__file__).resolve().parents[1] / "plugins" / "hostplug"
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch_hostplug") is None,
    reason=f"hostplug is not installed: pip install --no-build-isolation {PLUGIN} (./dev test does)")

PRELUDE = '''
import ctypes, json, threading, time
import numpy as np
import torch
import torch_hostplug
import triton
import triton.language as tl

seen = {}


@triton.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


def raw(t):
    """The tensor's memory as it is now, read behind the streams' back."""
    return np.ctypeslib.as_array((ctypes.c_float * t.numel()).from_address(t.data_ptr())).tolist()
'''


def run(tmp_path, body: str, **env: str) -> dict:
    script = tmp_path / "scenario.py"  # a file: Triton reads a kernel's source from it
    script.write_text(PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(seen))\n")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "CUDA_VISIBLE_DEVICES": "",
             "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton"),
             **env})
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    seen["stderr"] = done.stderr
    return seen


def test_the_plugin_works_without_devbridge_and_loads_no_devbridge_library(tmp_path):
    # As a third party's: with devbridge unimportable, importing the package
    # still sets the backend up, operators run, and no library of devbridge
    # or simdev is mapped into the process (its own links torch alone).
    script = tmp_path / "alone.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys
        sys.modules["devbridge"] = None  # import devbridge raises ImportError, as where it is not installed
        import torch, torch_hostplug
        x = torch.arange(4.0, device="hostplug:1") * 2
        mapped = {line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(".so")}
        ours = [path for path in mapped
                if os.path.basename(os.path.dirname(path)) in ("devbridge", "torch_simdev") or "simdev" in os.path.basename(path)]
        print(json.dumps({"values": x.cpu().tolist(), "device": str(x.device), "libraries": ours,
                          "hostplug": any("torch_hostplug" in path for path in mapped)}))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"values": [0.0, 2.0, 4.0, 6.0], "device": "hostplug:1", "libraries": [], "hostplug": True}


def test_eager_operators_match_the_cpu_under_the_delay(tmp_path):
    # The plugin's own paths (factories, views, resize_, copies across
    # devices, in-place, out= with a kernel that resizes its out, results that
    # are not tensors, a data-dependent shape), each queued behind delayed work.
    seen = run(tmp_path, """
        torch.manual_seed(0)
        a, b = torch.randn(5, 6), torch.randn(6, 3)
        with torch.hostplug.op_delay(5_000):
            ad, bd = a.to("hostplug"), b.to("hostplug")
            checks = {
                "matmul": ((ad @ bd).cpu(), a @ b),
                "view_t": (ad.view(3, 10).t().contiguous().cpu(), a.view(3, 10).t().contiguous()),
                "slice_inplace": (ad[1:3].mul_(2.0).cpu(), a[1:3].mul_(2.0)),
                "mse_out": (torch.nn.functional.mse_loss(ad, ad * 0.5).cpu(), torch.nn.functional.mse_loss(a, a * 0.5)),
                "cross_device": (ad.to("hostplug:1").sum(0).cpu(), a.sum(0)),
                "nonzero": (torch.nonzero(ad > 0.5).cpu(), torch.nonzero(a > 0.5)),
                "softmax": (ad.softmax(1).cpu(), a.softmax(1)),
            }
            grown = torch.zeros(2, device="hostplug")
            grown.fill_(3.0)
            grown.resize_(4)
            grown[2:].fill_(4.0)
            checks["resize"] = (grown.cpu(), torch.tensor([3.0, 3.0, 4.0, 4.0]))
            seen["item"] = ad[0, 0].item() == a[0, 0].item()
        seen["checks"] = {name: bool(got.shape == want.shape and torch.allclose(got, want, atol=1e-6))
                          for name, (got, want) in checks.items()}
    """)
    assert seen["item"] and seen["checks"] == dict.fromkeys(seen["checks"], True) and len(seen["checks"]) == 8


def test_a_triton_kernel_runs_on_the_host_target_on_each_device(tmp_path):
    seen = run(tmp_path, """
        import devbridge.triton
        from devbridge.triton.interpreter import interpreter
        hardware = devbridge.triton.declared("hostplug")
        seen["declared"] = [hardware.compiler, hardware.kernel_runtime]
        threads = []
        run_program = interpreter.run_program
        interpreter.run_program = lambda *args: (threads.append(threading.get_ident()), run_program(*args))[1]
        n = 100
        for index in (0, 1):
            device = f"hostplug:{index}"
            x = torch.arange(n, dtype=torch.float32, device=device)
            y = torch.full((n,), 0.5, device=device)
            out = torch.empty(n, device=device)
            with torch.accelerator.device_index(index):  # Triton launches on the current device, as on CUDA
                scale_add[(triton.cdiv(n, 32),)](x, y, out, n, 2.0, BLOCK=32)
            seen[device] = out.cpu().tolist() == (torch.arange(n, dtype=torch.float32) * 2.0 + 0.5).tolist()
        seen["programs"] = len(threads)
        seen["on_the_launching_thread"] = set(threads) == {threading.get_ident()}
    """)
    assert seen["declared"] == ["interpreter", "host"]
    assert seen["hostplug:0"] and seen["hostplug:1"]
    assert seen["programs"] == 8 and seen["on_the_launching_thread"]


def test_kernels_are_ordered_on_a_side_stream_under_the_delay(tmp_path):
    seen = run(tmp_path, """
        n = 64
        # The knob delays: a queued write returns at once, is not done, and a
        # reader behind the streams' back still sees the old values.
        x = torch.zeros(n, device="hostplug")
        torch.hostplug.synchronize()
        torch.hostplug.set_op_delay_us(200_000)
        start = time.perf_counter()
        x.fill_(7.0)
        seen["enqueue_s"] = time.perf_counter() - start
        seen["raw_right_after"] = raw(x)[:2]
        seen["read"] = x.cpu().tolist()[:2]
        seen["read_s"] = time.perf_counter() - start
        torch.hostplug.set_op_delay_us(0)

        stream = torch.Stream(device="hostplug:0")
        with stream:
            x = torch.zeros(n, device="hostplug")
            y = torch.zeros(n, device="hostplug")
            out = torch.zeros(n, device="hostplug")
            scale_add[(2,)](x, y, out, n, 1.0, BLOCK=32)  # compiled and loaded outside the delay
            torch.hostplug.synchronize()
            torch.hostplug.set_op_delay_us(30_000)
            x.fill_(5.0)                                   # queued, still pending at the launch
            scale_add[(2,)](x, y, out, n, 3.0, BLOCK=32)   # waits for it: out = 15
            seen["raw_after_launch"] = raw(out)[:2]
            out.add_(1.0)                                  # queued after the kernel: sees 15
            seen["add_pending"] = not stream.query()
            seen["raw_before_read"] = raw(out)[:2]
            seen["result"] = out.cpu().tolist()
            torch.hostplug.set_op_delay_us(0)
    """)
    assert seen["enqueue_s"] < 0.1 and seen["raw_right_after"] == [0.0, 0.0]
    assert seen["read"] == [7.0, 7.0] and seen["read_s"] >= 0.2
    assert seen["raw_after_launch"] == [15.0, 15.0]
    assert seen["add_pending"] and seen["raw_before_read"] == [15.0, 15.0]
    assert seen["result"] == [16.0] * 64


def test_two_host_threads_each_on_its_own_stream(tmp_path):
    seen = run(tmp_path, """
        n = 48
        warm = torch.zeros(n, device="hostplug")
        scale_add[(2,)](warm, warm, warm, n, 1.0, BLOCK=32)
        torch.hostplug.synchronize()
        barrier = threading.Barrier(3)  # the three threads queue at the same time
        results, errors = {}, []

        def worker(name, device):
            try:
                torch.accelerator.set_device_index(device)
                stream = torch.Stream(device=f"hostplug:{device}")
                with stream:
                    x = torch.zeros(n, device=f"hostplug:{device}")
                    y = torch.ones(n, device=f"hostplug:{device}")
                    out = torch.empty(n, device=f"hostplug:{device}")
                    barrier.wait()
                    got = []
                    for i in range(4):
                        x.fill_(float(i))                              # delayed
                        scale_add[(2,)](x, y, out, n, 2.0, BLOCK=32)  # out = 2i + 1
                        out.mul_(10.0)                                 # delayed, after the kernel
                        got.append(out.cpu().tolist())
                    results[name] = [row == [(2.0 * i + 1.0) * 10.0] * n for i, row in enumerate(got)]
            except Exception as error:
                errors.append(repr(error))

        torch.hostplug.set_op_delay_us(10_000)
        # Two threads on streams of hostplug:0, one on hostplug:1.
        threads = [threading.Thread(target=worker, args=(f"t{i}", device)) for i, device in enumerate((0, 0, 1))]
        for t in threads: t.start()
        for t in threads: t.join()
        torch.hostplug.set_op_delay_us(0)
        seen["results"] = results
        seen["errors"] = errors
    """)
    assert seen["errors"] == []
    assert seen["results"] == {name: [True] * 4 for name in ("t0", "t1", "t2")}


def test_torch_compile_trains_a_small_mlp_like_eager_cpu(tmp_path):
    seen = run(tmp_path, """
        from torch._inductor.utils import run_and_get_code
        from devbridge.triton.interpreter import interpreter
        programs = []
        run_program = interpreter.run_program
        interpreter.run_program = lambda *args: (programs.append(1), run_program(*args))[1]

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
        x, target = torch.randn(6, 8), torch.randn(6, 4)
        def step(m, x, target):
            return torch.nn.functional.mse_loss(torch.relu(m(x)) * 1.5, target)
        loss = step(model, x, target)
        loss.backward()

        device_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
        device_model.load_state_dict(model.state_dict())
        device_model.to("hostplug")
        compiled = torch.compile(lambda x, t: step(device_model, x, t))
        xd, td = x.to("hostplug"), target.to("hostplug")
        device_loss, code = run_and_get_code(compiled, xd, td)
        device_loss.backward()
        seen["triton_kernels"] = "@triton.jit" in "\\n".join(code)
        seen["programs"] = len(programs)
        close = lambda a, b: torch.allclose(a.detach().cpu(), b, atol=1e-5, rtol=1e-5)
        seen["loss"] = close(device_loss, loss.detach())
        seen["grads"] = [close(p.grad, q.grad) for p, q in zip(device_model.parameters(), model.parameters())]
        # Again, with every queued operator delayed: the extern matmuls
        # (hostplug's fallback, asynchronous) and the Triton kernels (run by
        # the host target once the stream caught up) must stay in order.
        for p in device_model.parameters(): p.grad = None
        with torch.hostplug.op_delay(2_000):
            device_loss = compiled(xd, td)
            device_loss.backward()
            seen["delayed_loss"] = close(device_loss, loss.detach())
            seen["delayed_grads"] = [close(p.grad, q.grad)
                                     for p, q in zip(device_model.parameters(), model.parameters())]
    """)
    assert seen["triton_kernels"] and seen["programs"] > 0
    assert seen["loss"] and seen["grads"] == [True] * 4
    assert seen["delayed_loss"] and seen["delayed_grads"] == [True] * 4


def test_inductors_compile_workers_load_a_plugin_without_an_entry_point(tmp_path):
    # Compile workers are fresh interpreters: hostplug has no torch.backends
    # entry point for them to load, so devbridge's kernel prelude imports its
    # package (devbridge.inductor._plugin_entry_point) once the pool is warm.
    seen = run(tmp_path, """
        from torch._inductor.async_compile import AsyncCompile
        x = torch.randn(64, device="hostplug")
        deadline = time.monotonic() + 120
        while not AsyncCompile.use_process_pool() and time.monotonic() < deadline:
            time.sleep(0.2)
        seen["pool"] = AsyncCompile.use_process_pool()
        compiled = torch.compile(lambda t: (t * 3).cos() + 1)
        seen["result"] = torch.allclose(compiled(x).cpu(), (x.cpu() * 3).cos() + 1, atol=1e-5)
    """, TORCHINDUCTOR_COMPILE_THREADS="2")
    assert seen["pool"] and seen["result"]


def test_devbridge_check_passes_with_the_triton_check_on_the_host_target(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "devbridge", "check", "--device", "hostplug", "--plugin", "torch_hostplug", "--json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "CUDA_VISIBLE_DEVICES": "",
             "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["passed"] and report["environment"]["backend"] == "hostplug"
    checks = {check["name"]: check for check in report["checks"]}
    failed = [name for name, check in checks.items() if check["status"] not in ("pass", "skip")]
    assert failed == []
    assert all(check["detail"] for check in checks.values() if check["status"] == "skip")
    assert checks["triton.kernel"]["status"] == "pass"
    assert "host kernel runtime" in checks["triton.kernel"]["detail"]
    assert "(delay on)" in checks["triton.kernel"]["detail"]  # the check found the knob and held the stream
    assert checks["torch.compile"]["status"] == "pass"


def test_graph_capture_is_refused_naming_the_fix_and_reduce_overhead_runs_uncaptured(tmp_path):
    seen = run(tmp_path, """
        import devbridge.graphs
        x = torch.ones(16, device="hostplug")
        try:
            with devbridge.graphs.graph(devbridge.graphs.Graph()):
                x * 2
        except NotImplementedError as error:
            seen["graphs"] = str(error)
        f = torch.compile(lambda t: (t * 2 + 1).sin(), mode="reduce-overhead")
        seen["reduce_overhead"] = []
        for value in (0.0, 1.0, 2.0):
            x.fill_(value)
            seen["reduce_overhead"].append(torch.allclose(f(x).cpu(), torch.full((16,), value * 2 + 1).sin()))
        from devbridge.inductor.graph_capture import graph_capture_counts
        seen["counts"] = graph_capture_counts()
    """)
    assert "the 'hostplug' plugin registered no graph table" in seen["graphs"]
    assert "register_graph_api" in seen["graphs"]
    assert seen["reduce_overhead"] == [True] * 3
    assert seen["counts"]["captures"] == 0 and seen["counts"]["not_captured"] >= 1
    assert "runs this graph without graph capture: the hostplug plugin registered no graph table" in seen["stderr"]
