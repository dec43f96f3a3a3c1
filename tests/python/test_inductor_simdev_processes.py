"""torch.compile on simdev in fresh interpreters: Inductor's compile
workers (subprocesses, with the plugin autoloaded or imported), registration
at the first compile, warm starts from the caches of an earlier process, and
a process that exits with compiled kernels still queued. Apart from
test_inductor_simdev.py so that a parallel test run can take these
subprocess-bound tests on a worker of their own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev


# ------------------------------------------------------------- compile workers (fresh interpreters)

WORKER_SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0":
        import torch_simdev  # imported explicitly, which sets devbridge up; the workers do not autoload it
    import torch._inductor.config as config
    config.compile_threads = int(sys.argv[1])
    assert config.worker_start_method == "subprocess", config.worker_start_method
    import devbridge.triton.interpreter.interpreter as interpreter
    if config.compile_threads > 1:
        # Inductor compiles in-process until its worker pool is up: wait for it.
        from torch._inductor.async_compile import AsyncCompile
        AsyncCompile.use_process_pool()
        AsyncCompile.wait_pool_ready(timeout=300)

    def f(x, y):
        return torch.softmax(x * y + 1.0, dim=-1).sum(0)

    x, y = torch.randn(16, 40), torch.randn(16, 40)
    out = torch.compile(f, fullgraph=True)(x.to("simdev"), y.to("simdev"))
    torch.testing.assert_close(out.cpu(), f(x, y), atol=1e-5, rtol=1e-5)
    if sys.argv[2] == "scan":
        # A split scan (its own kernel class) also carries the worker prelude.
        from torch._inductor.utils import run_and_get_code
        z = torch.randn(65536)
        scanned, code = run_and_get_code(torch.compile(lambda t: torch.cumsum(t, 0)), z.to("simdev"))
        assert any("split_scan" in text for text in code)
        torch.testing.assert_close(scanned.cpu(), torch.cumsum(z, 0), atol=1e-2, rtol=1e-3)
    import devbridge.inductor
    assert devbridge.inductor.registered() == "simdev"
    # Kernels compiled in this process are remembered by the interpreter target.
    print("compiled-here", len(interpreter._compiled_here))
""")


def run_worker_script(tmp_path, threads, autoload, scan=False):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "t"))
    env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
    if not autoload:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    script = tmp_path / "compile_in_workers.py"
    script.write_text(WORKER_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(threads), "scan" if scan else "-"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return int(done.stdout.split("compiled-here")[-1].split()[0])


def test_inductors_subprocess_compile_workers_compile_the_kernels(tmp_path):
    assert run_worker_script(tmp_path, threads=2, autoload=True, scan=True) == 0  # all compiled in the workers


def test_compile_workers_load_the_plugin_when_autoload_is_off(tmp_path):
    assert run_worker_script(tmp_path, threads=2, autoload=False) == 0


def test_compile_threads_1_compiles_in_process(tmp_path):
    assert run_worker_script(tmp_path, threads=1, autoload=True) > 0


def test_autoload_registers_at_the_first_compile_without_any_call(tmp_path):
    script = tmp_path / "first_compile.py"
    script.write_text(textwrap.dedent("""
        import torch, devbridge.inductor
        assert devbridge.inductor.registered() is None  # nothing of Inductor's imported yet
        torch._dynamo.reset()  # clears Dynamo's callbacks; the registration is still armed
        out = torch.compile(lambda x: x.cos() + 1)(torch.zeros(4, device="simdev"))
        assert out.cpu().tolist() == [2.0] * 4
        assert devbridge.inductor.registered() == "simdev"
    """))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "i"), TRITON_CACHE_DIR=str(tmp_path / "t"),
               TORCHINDUCTOR_COMPILE_THREADS="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]


FRESH_WORKER_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import devbridge.inductor.worker as worker
    worker.prepare("simdev", None)  # the first line of a simdev kernel module, as in a fresh compile worker
    import devbridge.inductor
    assert devbridge.inductor.registered() is None  # the compiler's part was not registered ...
    compiler = [m for m in ("torch._inductor.codegen.triton", "torch._inductor.lowering",
                            "torch._inductor.pattern_matcher", "torch._inductor.fx_passes.joint_graph")
                if m in sys.modules]
    assert not compiler, f"a compile worker imported Inductor's compiler: {compiler}"
    # ... what running kernels needs was
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.runtime import triton_helpers
    assert get_interface_for_device("simdev").get_raw_stream(0) == torch.accelerator.current_stream(0).native_handle
    assert triton_helpers.set_driver_to_gpu.__module__ == "devbridge.inductor.driver_routing"
    # and register() completes it in a process that compiles after all.
    out = torch.compile(lambda x: x.sin() * 2)(torch.zeros(4, device="simdev"))
    assert out.cpu().tolist() == [0.0] * 4 and devbridge.inductor.registered() == "simdev"
""")


def test_a_compile_worker_registers_the_runtime_without_importing_inductors_compiler(tmp_path):
    script = tmp_path / "fresh_worker.py"
    script.write_text(FRESH_WORKER_SCRIPT)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "i"), TRITON_CACHE_DIR=str(tmp_path / "t"),
               TORCHINDUCTOR_COMPILE_THREADS="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]


# ------------------------------------------------------------- warm starts (static launches)

WARM_START_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import devbridge.inductor
    from devbridge.inductor.static_launch import PluginStaticKernel
    from torch._dynamo.utils import counters
    from torch._inductor.runtime import triton_heuristics

    devbridge.inductor.register()
    compiles, loads = [], []
    precompile_config = triton_heuristics.CachingAutotuner._precompile_config
    load_kernel = PluginStaticKernel.load_kernel

    def counting_compile(self, *args, **kwargs):
        compiles.append(self.inductor_meta.get("kernel_name"))
        return precompile_config(self, *args, **kwargs)

    def counting_load(self, device):
        loads.append(self.name)
        return load_kernel(self, device)

    triton_heuristics.CachingAutotuner._precompile_config = counting_compile
    PluginStaticKernel.load_kernel = counting_load

    def f(x, w):
        return torch.softmax(x @ w * 2 + 1, dim=-1).sum(0)

    x, w = torch.randn(32, 16), torch.randn(16, 16)
    side = torch.Stream(device="simdev")
    with side:
        out = torch.compile(f, fullgraph=True)(x.to("simdev"), w.to("simdev"))
        torch.testing.assert_close(out.cpu(), f(x, w), atol=1e-4, rtol=1e-4)
    inductor = counters["inductor"]
    print("RESULT", len(compiles), len(loads), inductor["triton_bundler_save_static_autotuner"],
          inductor["triton_bundler_load_static_autotuner"], inductor["fxgraph_cache_hit"])
""")


def _a_process_with_the_caches_of(tmp_path, script_text: str):
    """A function that runs `script_text` in a fresh process with the Inductor
    and Triton caches under `tmp_path` (the same for every call: the second
    call is a warm start) and returns the numbers the script printed after
    "RESULT", and its stderr."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "t"),
               TORCHINDUCTOR_COMPILE_THREADS="1")
    script = tmp_path / "script.py"
    script.write_text(script_text)

    def run_once() -> tuple[list[int], str]:
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
        return [int(v) for v in done.stdout.split("RESULT")[-1].split()], done.stderr

    return run_once


def test_a_warm_start_restores_plugin_kernels_from_their_binaries_without_compiling(tmp_path):
    """As cuda kernels through PyTorch's static CUDA launcher: the first process
    compiles and saves its kernels with the FX graph as static launches; a
    second process with the same caches loads each kernel's binary through
    devbridge's driver and launches it with devbridge's bound launcher, with
    no triton.compile (CachingAutotuner._precompile_config) and no worker."""
    run_once = _a_process_with_the_caches_of(tmp_path, WARM_START_SCRIPT)
    (compiled, loaded, saved, restored, graph_hits), _ = run_once()
    assert compiled >= 1 and loaded == compiled and saved == 1 and restored == 0 and graph_hits == 0
    (compiled, loaded, saved, restored, graph_hits), _ = run_once()
    assert graph_hits == 1 and compiled == 0, "the warm start compiled kernels again"
    assert restored >= 1 and loaded >= restored


GRAPH_CACHE_SCRIPT = textwrap.dedent("""
    import torch
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    cpu1, cpu2 = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)
    x = torch.randn(4, 6, 32)
    lin1, lin2 = torch.nn.Linear(32, 32).to("simdev"), torch.nn.Linear(32, 32).to("simdev")
    lin1.load_state_dict(cpu1.state_dict())
    lin2.load_state_dict(cpu2.state_dict())

    def f(t, m):
        return torch.nn.functional.gelu(m(t))

    g = torch.compile(f)
    # The second call recompiles (another module) with the kernels the first
    # one ran: their JITFunctions go into the FX graph cache after a launch.
    out = g(g(x.to("simdev"), lin1), lin2)
    out.sum().backward()
    expected = f(f(x, cpu1), cpu2)
    expected.sum().backward()
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)
    for mine, theirs in ((lin1, cpu1), (lin2, cpu2)):
        for p, q in zip(mine.parameters(), theirs.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-5, rtol=1e-5)
    inductor = counters["inductor"]
    print("RESULT", inductor["fxgraph_cache_pickle_error"], inductor["fxgraph_cache_miss"], inductor["fxgraph_cache_hit"])
""")


def test_graphs_whose_kernels_already_ran_are_saved_to_the_fx_graph_cache(tmp_path):
    """The interpreter target caches a kernel's rewritten Python function on
    its JITFunction; Inductor pickles that JITFunction with the graph (a
    static launch), and pickle refused the function ("Can't pickle <function
    triton_poi_...>: it's not the same object as ...compile_tasks...."), so
    such graphs were never cached. Saved now: a second process with the same
    caches takes every graph, forward and backward, from the cache and
    computes what eager CPU does."""
    run_once = _a_process_with_the_caches_of(tmp_path, GRAPH_CACHE_SCRIPT)
    (pickle_errors, misses, hits), stderr = run_once()
    assert "Can't pickle" not in stderr, stderr[-6000:]
    assert pickle_errors == 0 and misses >= 2 and hits == 0
    (pickle_errors, misses, hits), stderr = run_once()
    assert "Can't pickle" not in stderr, stderr[-6000:]
    assert pickle_errors == 0 and hits >= 2 and misses == 0, "the warm start compiled graphs again"


# ------------------------------------------------------------- exit

def test_a_process_exiting_with_compiled_kernels_still_queued_exits_cleanly(tmp_path):
    """Compiled kernels on simdev run in Triton's interpreter on the stream's
    worker thread, in Python. Still queued when the process exits, they ran
    while the interpreter finalized and aborted the process; now the queues
    are finished at exit while Python is whole (simdev's drain, and
    devbridge's before it stops queued Python kernels), so the queued work
    completes and nothing is reported as failed."""
    script = tmp_path / "exit_with_queued_work.py"
    script.write_text(textwrap.dedent("""
        import atexit

        def after_every_other_exit_hook():  # registered first: runs last
            print("queued result", torch.allclose(out.cpu(), expected, atol=1e-6))

        atexit.register(after_every_other_exit_hook)
        import torch
        torch.simdev.set_device(1)
        f = torch.compile(lambda x: torch.softmax(x * 2 + 1, -1))
        x = torch.randn(8, 16, device="simdev:1")
        f(x)
        y = x + 1  # other values than the first output, whose memory `out` may reuse
        expected = torch.softmax(y.cpu() * 2 + 1, -1)
        with torch.simdev.op_delay(300_000):
            out = f(y)  # queued behind a 0.3 s delay; nothing waits for it
        torch.simdev.synchronize(0)  # the other device only
        print("exiting")
    """))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "t"),
               TORCHINDUCTOR_COMPILE_THREADS="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    # the queued kernels ran to the end, while Python was whole, and nothing failed
    assert done.stdout.split()[-3:] == ["queued", "result", "True"], done.stdout[-2000:] + done.stderr[-4000:]
    assert "failed" not in done.stderr, done.stderr[-4000:]
