"""torch.compile on simdev: Inductor generates Triton kernels for the plugin
device, devbridge's backend compiles them for simdev's target, and devbridge's
launcher runs them, interpreted, on simdev's current stream. Every case is
compared with eager on the same inputs (compile_cases.py), and the generated
code is checked to be Triton for simdev (no fallback to eager or the CPU)."""

from __future__ import annotations

import contextlib
import sys
import threading

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed: pip install triton==3.7.1")

import devbridge  # noqa: E402
import devbridge.inductor  # noqa: E402
from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

import compile_cases as cases  # noqa: E402
from inductor_support import private_inductor, reset_dynamo_around_test  # noqa: E402
from launch_support import skip_without_simdev  # noqa: E402

pytestmark = skip_without_simdev
DEVICE = "simdev"


@pytest.fixture(scope="module", autouse=True)
def inductor_for_simdev(tmp_path_factory):
    with private_inductor(tmp_path_factory.mktemp("inductor-cache")):
        yield


fresh_dynamo = pytest.fixture(autouse=True)(reset_dynamo_around_test)



def compile_and_compare(case, **compile_options):
    inputs = case.inputs()
    expected = case.fn(*inputs)
    compiled = torch.compile(case.fn, fullgraph=True, **compile_options)
    actual, code = run_and_get_code(compiled, *cases.to(inputs, DEVICE))
    cases.assert_close(actual, expected, case.atol, case.rtol)
    return "\n".join(code)


def assert_triton_for_simdev(code: str):
    assert "@triton.jit" in code and "async_compile.triton(" in code, code[:2000]
    assert "devbridge_worker.prepare('simdev'" in code
    assert "from devbridge._C import current_stream as get_raw_stream" in code
    assert "cpp_fused" not in code and "device='cpu'" not in code, "a CPU kernel in a simdev graph"


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_compiled_function_matches_eager(case):
    assert_triton_for_simdev(compile_and_compare(case))


def test_dynamic_shapes_one_graph_for_several_sizes():
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(cases.pointwise_chain, fullgraph=True, dynamic=True, backend=counter)
    for n in (33, 100, 257):
        x, y = cases._randn(n), cases._randn(n, seed=1)
        cases.assert_close(compiled(x.to(DEVICE), y.to(DEVICE)), cases.pointwise_chain(x, y), 1e-5, 1e-5)
    assert counter.frame_count == 1


def test_a_dtype_change_recompiles():
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(cases.softmax, fullgraph=True, backend=counter)
    for dtype in (torch.float32, torch.float64):
        x = cases._randn(9, 31, dtype=dtype)
        result = compiled(x.to(DEVICE))
        assert result[0].dtype == dtype
        cases.assert_close(result, cases.softmax(x), 1e-5, 1e-5)
    assert counter.frame_count == 2


def test_mlp_forward_backward_and_optimizer_step():
    torch.manual_seed(0)
    eager_model = cases.MLP()
    model = cases.MLP().to(DEVICE)
    model.load_state_dict({k: v.to(DEVICE) for k, v in eager_model.state_dict().items()})
    eager_optimizer = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled_step = torch.compile(cases.train_step)
    x, target = cases._randn(8, 32, seed=1), cases._randn(8, 32, seed=2)
    for _ in range(2):
        expected = cases.train_step(eager_model, eager_optimizer, x, target)
        actual = compiled_step(model, optimizer, x.to(DEVICE), target.to(DEVICE))
        cases.assert_close(actual, expected, 1e-5, 1e-5)
    for (name, p), e in zip(model.named_parameters(), eager_model.parameters()):
        cases.assert_close(p, e, 1e-5, 1e-5)
        assert p.grad is not None and p.grad.device.type == DEVICE, name


@pytest.mark.parametrize("capturable", [False, True], ids=["step_counts_on_the_cpu", "capturable"])
def test_a_compiled_adamw_step_matches_eager(capturable):
    """torch.compile(optimizer.step): torch.compile makes AdamW capturable for
    cuda and xpu parameters only, so on a plugin device its step counts stay
    CPU tensors (read on the host by the update kernel) unless it is built
    capturable; both forms follow eager AdamW on the CPU."""
    torch.manual_seed(0)
    eager_model = cases.MLP()
    model = cases.MLP().to(DEVICE)
    model.load_state_dict({k: v.to(DEVICE) for k, v in eager_model.state_dict().items()})
    eager_optimizer = torch.optim.AdamW(eager_model.parameters(), lr=1e-2, foreach=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True, capturable=capturable)
    compiled_step = torch.compile(optimizer.step)
    for seed in range(3):
        x, target = cases._randn(8, 32, seed=seed), cases._randn(8, 32, seed=seed + 10)
        for m, opt, step, device in ((eager_model, eager_optimizer, eager_optimizer.step, "cpu"),
                                     (model, optimizer, compiled_step, DEVICE)):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(m(x.to(device)), target.to(device)).backward()
            step()
    for p, e in zip(model.parameters(), eager_model.parameters()):
        cases.assert_close(p, e, 1e-5, 1e-5)
    step_count = optimizer.state[next(model.parameters())]["step"]
    assert step_count.device.type == (DEVICE if capturable else "cpu") and step_count.item() == 3


def test_two_layer_transformer_block_forward_and_backward():
    eager = cases.two_blocks()
    model = cases.two_blocks().to(DEVICE)
    x = cases._randn(2, 8, 32, seed=4)
    compiled = torch.compile(model, fullgraph=True)
    out, code = run_and_get_code(compiled, x.to(DEVICE))
    expected = eager(x)
    cases.assert_close(out, expected, 1e-4, 1e-4)
    assert_triton_for_simdev("\n".join(code))
    out.sum().backward()
    expected.sum().backward()
    for p, e in zip(model.parameters(), eager.parameters()):
        cases.assert_close(p.grad, e.grad, 1e-4, 1e-4)


def test_compiled_kernels_run_on_the_callers_stream_in_order():
    """Under a non-default stream, with simdev's delay knob holding up every
    operation: if the Triton kernel ran on another stream it would read x
    before fill_ and give 1, or be overtaken by add_."""
    compiled = torch.compile(lambda x: x * 2.0 + 1.0, fullgraph=True)
    n = 64
    compiled(torch.zeros(n, device=DEVICE))  # compiled, loaded
    torch.accelerator.synchronize()
    stream = torch.Stream(device=f"{DEVICE}:0")
    with stream:
        x = torch.zeros(n, device=DEVICE)
        torch.accelerator.synchronize()
        with torch.simdev.op_delay(30_000):
            x.fill_(5.0)              # earlier work
            out = compiled(x)         # 11
            out.add_(1.0)             # later work: 12
            assert not stream.query()  # all still queued on this stream
            result = out.cpu()
    assert result.tolist() == [12.0] * n


def test_two_host_threads_on_their_own_streams():
    compiled = torch.compile(cases.pointwise_chain, fullgraph=True)
    x, y = cases._randn(512), cases._randn(512, seed=1)
    expected = cases.pointwise_chain(x, y)
    for device in range(torch.accelerator.device_count()):  # compiled here, once per device
        compiled(x.to(f"{DEVICE}:{device}"), y.to(f"{DEVICE}:{device}"))
    errors, results = [], {}

    def worker(index):
        try:
            device = index % torch.accelerator.device_count()
            torch.accelerator.set_device_index(device)
            stream = torch.Stream(device=f"{DEVICE}:{device}")
            with stream:
                with torch.simdev.op_delay(5_000) if index == 0 else contextlib.nullcontext():
                    for _ in range(3):
                        out = compiled(x.to(f"{DEVICE}:{device}"), y.to(f"{DEVICE}:{device}"))
                results[index] = out.cpu()
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


def test_reduce_overhead_captures_on_a_plugin_device():
    # graph_capture.py; test_inductor_reduce_overhead_simdev.py has the cases
    start = devbridge.inductor.graph_capture_counts()
    case = cases.CASES[0]
    compile_and_compare(case, mode="reduce-overhead")
    now = devbridge.inductor.graph_capture_counts()
    assert now["not_captured"] == start["not_captured"], now


def test_register_is_idempotent_and_names_what_it_patched():
    assert devbridge.inductor.register() == DEVICE
    assert devbridge.inductor.register(DEVICE) == DEVICE
    assert devbridge.inductor.registered() == DEVICE
    patched = "\n".join(devbridge.inductor.patched_torch_apis())
    for api in ("register_interface_for_device", "register_backend_for_device", "register_device_op_overrides",
                "GPU_TYPES", "has_triton", "set_driver_to_gpu", "CachingAutotuner", "benchmarking"):
        assert api in patched


def test_devbridges_code_is_part_of_inductors_cache_key():
    """A cached compiled graph is code devbridge generated: another devbridge
    (another fingerprint in the device's cache-key entry) must miss Inductor's
    FX-graph cache instead of being served the old wrapper, and the same
    devbridge must hit it."""
    from devbridge.inductor import cache_key_config
    from torch._dynamo.utils import counters

    def f(x):
        return torch.sigmoid(x * 3.25 + 0.125)

    x = cases._randn(64).to(DEVICE)

    def compile_and_count():
        torch._dynamo.reset()
        counters.clear()
        torch.compile(f, fullgraph=True)(x)
        return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]

    ours = cache_key_config.codegen
    assert ours.startswith(f"devbridge {devbridge.__version__} ") and "compiler=" in ours, ours
    compile_and_count()
    assert compile_and_count() == (1, 0)
    try:
        cache_key_config.codegen = ours + " (another devbridge)"
        assert compile_and_count() == (0, 1)
    finally:
        cache_key_config.codegen = ours
    assert compile_and_count() == (1, 0)


def test_register_refuses_another_device_name():
    with pytest.raises(ValueError, match=r"served for the PrivateUse1 device, which is 'simdev'"):
        devbridge.inductor.register("cuda")


def test_an_unchecked_torch_version_is_refused_with_the_fix(monkeypatch):
    from devbridge.inductor import _torch_api

    monkeypatch.setattr(torch, "__version__", "2.99.0")
    with pytest.raises(RuntimeError, match=r"devbridge.inductor: torch 2.99.0 is not a release devbridge was checked "
                                           r"on \(torch 2.11, .*DEVBRIDGE_ALLOW_UNCHECKED_VERSIONS=1"):
        _torch_api.check_version()


def test_the_device_interface_answers_from_the_hardware():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.runtime.hints import DeviceProperties

    interface = get_interface_for_device(DEVICE)
    assert interface.is_available() and interface.device_count() == torch.accelerator.device_count()
    stream = torch.Stream(device=f"{DEVICE}:1")
    with stream:
        assert interface.get_raw_stream(1) == stream.native_handle
    assert interface.get_raw_stream(0) == torch.accelerator.current_stream(0).native_handle
    properties = DeviceProperties.create(torch.device(DEVICE, 0))
    target = devbridge.triton.driver().get_current_target()
    assert (properties.type, properties.cc, properties.warp_size) == (target.backend, target.arch,
                                                                      target.warp_size)
    event_a, event_b = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    assert isinstance(event_a, torch.Event) and isinstance(interface.Stream(), torch.Stream)
    event_a.record()
    event_b.record()
    interface.synchronize()
    assert event_a.elapsed_time(event_b) >= 0.0


# ------------------------------------------------------------- Triton launch hooks

@contextlib.contextmanager
def counting_launch_metadata():
    """Counts CompiledKernel.launch_metadata calls (the real method runs)."""
    from triton.compiler.compiler import CompiledKernel

    original = CompiledKernel.launch_metadata
    calls = []

    def counted(self, *args, **kwargs):
        calls.append(self.name)
        return original(self, *args, **kwargs)

    CompiledKernel.launch_metadata = counted
    try:
        yield calls
    finally:
        CompiledKernel.launch_metadata = original


def test_without_launch_hooks_plugin_kernels_skip_the_launch_metadata():
    from torch._inductor.runtime import triton_heuristics
    from triton import knobs

    knobs_before = triton_heuristics.knobs
    case = cases.CASES[0]
    inputs = cases.to(case.inputs(), DEVICE)
    compiled = torch.compile(case.fn, fullgraph=True)
    compiled(*inputs)
    with counting_launch_metadata() as calls:
        cases.assert_close(compiled(*inputs), case.fn(*case.inputs()), case.atol, case.rtol)
    assert calls == []
    assert triton_heuristics.knobs is knobs_before is knobs  # Inductor's knobs restored after the build
    assert knobs.runtime.launch_enter_hook is not None  # Triton's own knobs never changed


@pytest.mark.parametrize("hook_name, scale", [("launch_enter_hook", 3.25), ("launch_exit_hook", 1.75)])
def test_a_launch_hook_installed_before_compiling_sees_every_plugin_launch(hook_name, scale):
    """Either hook alone keeps both in the launchers (they are left out only
    when both chains are empty), and it sees every launch."""
    from triton import knobs

    seen = []

    def hook(metadata):
        seen.append(metadata.get()["name"])

    def f(x):  # a kernel of its own (`scale` is in its source): launchers are built once per kernel
        return (x * scale + 0.5).relu()

    chain = getattr(knobs.runtime, hook_name)
    chain.add(hook)
    try:
        compiled = torch.compile(f, fullgraph=True)
        x = torch.randn(64)
        compiled(x.to(DEVICE))
        seen.clear()
        torch.testing.assert_close(compiled(x.to(DEVICE)).cpu(), f(x))
    finally:
        chain.remove(hook)
    assert len(seen) == 1 and seen[0].startswith("triton_"), seen


# ------------------------------------------------------------- warm starts (static launches)

def test_a_launch_hook_keeps_plugin_kernels_on_tritons_launcher():
    """A static launch calls no hooks: with one installed, the kernel keeps
    Triton's launcher (the hook test above sees its launches), as PyTorch's
    static CUDA launcher refuses too."""
    from triton import knobs

    from devbridge.inductor.static_launch import PluginStaticKernel

    def hook(metadata):
        pass

    knobs.runtime.launch_enter_hook.add(hook)
    try:
        with pytest.raises(RuntimeError, match="launch hook is installed"):
            PluginStaticKernel(object(), "/nonexistent")
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)


def test_plugin_kernels_are_launched_statically_by_devbridge():
    from torch._inductor.runtime import triton_heuristics

    launchers = []
    make_launchers = triton_heuristics.CachingAutotuner._make_launchers

    def recording(self, *args, **kwargs):
        result = make_launchers(self, *args, **kwargs)
        launchers.extend(self.launchers)
        return result

    def f(x):
        return (x * 1.625 - 0.5).sigmoid()

    x = torch.randn(256)
    triton_heuristics.CachingAutotuner._make_launchers = recording
    try:
        torch.testing.assert_close(torch.compile(f, fullgraph=True)(x.to(DEVICE)).cpu(), f(x))
    finally:
        triton_heuristics.CachingAutotuner._make_launchers = make_launchers
    assert launchers and all(getattr(launcher, "_is_static", False) for launcher in launchers)
    runners = {type(launcher.__globals__["runner"]).__name__ for launcher in launchers}
    assert runners == {"BoundLaunch"}, runners


# ------------------------------------------------------------- what the wrapper and the graph passes make

def test_buffers_are_allocated_by_devbridges_fast_path_on_the_current_device():
    def f(x):
        return (x.sin() @ x.T).cos()  # an extern mm between two kernels: intermediate buffers

    x = torch.randn(32, 32)
    with torch.accelerator.device_index(1):
        out, code = run_and_get_code(torch.compile(f, fullgraph=True), x.to("simdev:1"))
    text = "\n".join(code)
    assert "from devbridge._C import plugin_empty_strided as empty_strided_simdev" in text
    assert "empty_strided_simdev((32, 32), (32, 1), torch.float32)" in text
    call = text[text.index("def call("):]
    assert "empty_strided(" not in call.replace("empty_strided_simdev(", ""), call[:3000]
    assert out.device == torch.device("simdev:1")
    torch.testing.assert_close(out.cpu(), f(x), atol=1e-4, rtol=1e-4)


def test_plugin_empty_strided_refuses_bad_arguments_with_the_problem_named():
    from devbridge import _C

    t = _C.plugin_empty_strided((3, 4), (1, 3), torch.float16)
    assert (t.device.type, t.shape, t.stride(), t.dtype) == ("simdev", (3, 4), (1, 3), torch.float16)
    with pytest.raises(ValueError, match="size has 1 dimensions but stride 2"):
        _C.plugin_empty_strided((3,), (1, 2), torch.float32)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype, got str"):
        _C.plugin_empty_strided((3,), (1,), "float32")
    with pytest.raises(TypeError, match=r"size\[1\] must be an int, got float"):
        _C.plugin_empty_strided((3, 1.5), (1, 1), torch.float32)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        _C.plugin_empty_strided((3,), (1,))
    with pytest.raises(RuntimeError):
        _C.plugin_empty_strided((-1,), (1,), torch.float32)


def test_softmax_takes_its_online_form_as_on_cuda():
    """Inductor rewrites softmax into one pass (prepare_softmax_online) for
    cuda and xpu only; the plugin device gets the same kernel."""
    def f(x):
        return torch.softmax(x * 2 + 1, dim=-1)

    x = torch.randn(16, 128)
    out, code = run_and_get_code(torch.compile(f, fullgraph=True), x.to(DEVICE))
    assert "prepare_softmax_online" in "\n".join(code)
    torch.testing.assert_close(out.cpu(), f(x), atol=1e-5, rtol=1e-5)


def test_no_sm_count_warning_unless_max_autotune_was_asked_for():
    """Inductor asks whether the GPU is big enough for its GEMM templates even
    in the default mode (addmm): on a plugin device declaring few SMs, the
    answer stays no, and the warning is kept for a user who asked for
    max-autotune."""
    import logging

    from torch._inductor import config
    from torch._inductor import utils as inductor_utils

    from torch._inductor.runtime.hints import DeviceProperties

    device = torch.device(DEVICE, 0)
    assert DeviceProperties.create(device).multi_processor_count < 68  # Inductor's minimum for a "big GPU"
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    inductor_utils.log.addHandler(handler)
    try:
        model = torch.nn.Linear(8, 4).to(DEVICE)
        x = cases._randn(3, 8, seed=4).to(DEVICE)
        torch.testing.assert_close(torch.compile(model)(x).cpu(), model(x).cpu(), atol=1e-5, rtol=1e-5)
        assert inductor_utils.is_big_gpu(device) is False
        assert not [r for r in records if "Not enough SMs" in r], records
        with config.patch(max_autotune_gemm=True):
            assert inductor_utils.is_big_gpu(device) is False
        assert [r for r in records if "Not enough SMs" in r], records
    finally:
        inductor_utils.log.removeHandler(handler)


def test_a_layer_norms_backward_fuses_its_two_reductions_as_on_cuda():
    """Inductor fuses the two reductions of a layer norm's backward (the
    weight's gradient summed down the columns, the input's along the rows)
    into one kernel on cuda and xpu (mix-order reduction); on the plugin
    device too, with the same gradients. Its size gate (5M elements, 4096
    rows) is lifted so that the interpreter runs it in seconds."""
    from torch._inductor import config, metrics, scheduler

    if not hasattr(scheduler, "_is_gpu_triton_backend"):
        pytest.skip(f"torch {torch.__version__} tests the device type inline (MixOrderReduction.can_fuse)")

    def loss(x, weight, bias):
        return torch.nn.functional.layer_norm(x, (128,), weight, bias).square().sum()

    inputs = (cases._randn(512, 128, seed=8), cases._randn(128, seed=9), cases._randn(128, seed=10))
    expected = torch.autograd.grad(loss(*[t.requires_grad_() for t in inputs]), inputs)
    on_plugin = [t.detach().to(DEVICE).requires_grad_() for t in inputs]
    metrics.reset()
    with config.patch({"triton.mix_order_reduction_non_strict_mode": True, "fx_graph_cache": False}):
        grads = torch.autograd.grad(torch.compile(loss)(*on_plugin), on_plugin)
    assert metrics.codegen_mix_order_reduction == 1
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got.cpu(), want, atol=1e-3, rtol=1e-3)


def test_gemm_templates_take_the_configs_of_the_backend_the_compiler_targets():
    """Under max-autotune Inductor offers its Triton GEMM templates with the
    configs its template registry holds for the device type; a plugin device
    has none, so the templates came with no config. A device whose compiler
    targets Triton's cuda backend gets cuda's; simdev's compiler is its own and
    gets none; an entry of the device's own wins."""
    from torch._inductor import choices
    from torch._inductor.kernel import bmm, mm  # noqa: F401  (they register the templates' heuristics)
    from torch._inductor.template_heuristics import registry
    from torch._inductor.template_heuristics.base import TemplateConfigHeuristics

    from devbridge.inductor import _template_peer, _torch_api
    from devbridge.triton.hardware import Hardware

    assert _template_peer(Hardware("anydev", "nvidia", "cuda")) == "cuda"
    assert _template_peer(Hardware("anydev", "amd", "hip")) is None  # a CUDA or CPU torch keeps ROCm's elsewhere
    assert _template_peer(Hardware("anydev", "interpreter", "simdev")) is None
    assert not [line for line in devbridge.inductor.patched_torch_apis() if "template" in line]

    pairs = [("triton::mm", "mm"), ("triton::mm", "addmm"), ("triton::bmm", "bmm"), ("triton::bmm", "baddbmm")]
    assert all(type(registry.get_template_heuristic(t, "gemmdev", op)) is TemplateConfigHeuristics for t, op in pairs)
    assert _torch_api.share_template_heuristics("gemmdev", "cuda") in ("replaced", "already")
    assert choices.get_template_heuristic is registry.get_template_heuristic  # rebound where imported by name
    binders = [sys.modules[name] for name in _torch_api._TEMPLATE_HEURISTIC_BINDERS if name in sys.modules]
    assert len(binders) >= 3  # 2.11/2.13: registry, package, choices; 2.14: five modules
    assert all(module.get_template_heuristic is registry.get_template_heuristic for module in binders)
    for template, op in pairs:
        shared = choices.get_template_heuristic(template, "gemmdev", op)
        assert shared is registry.get_template_heuristic(template, "cuda", op), (template, op)
        assert type(shared) is not TemplateConfigHeuristics
    assert type(registry.get_template_heuristic("triton::mm", DEVICE, "mm")) is TemplateConfigHeuristics

    class OwnConfigs(TemplateConfigHeuristics):
        pass

    key = ("triton::bmm", "gemmdev", None)
    registry.register_template_heuristic(*key[:2], op_name=key[2])(OwnConfigs)
    try:
        assert type(registry.get_template_heuristic("triton::bmm", "gemmdev", "bmm")) is OwnConfigs
    finally:
        registry._TEMPLATE_HEURISTIC_REGISTRY.pop(key)
        registry._HEURISTIC_CACHE.pop(("triton::bmm", "gemmdev", "bmm"), None)


def test_a_max_autotune_gemm_template_compiles_and_runs_on_the_plugin_stream(monkeypatch):
    """The template path end to end on a plugin device: Inductor's Triton mm
    template, with cuda's configs, autotuned, compiled for simdev and launched
    by devbridge. simdev declares too few SMs for templates and a compiler of
    its own, so the test lends it both (a device compiling for cuda has them,
    test_cudadev_inductor.py)."""
    from torch._inductor import config
    from torch._inductor import utils as inductor_utils
    from torch._inductor.template_heuristics import registry

    from devbridge.inductor import _torch_api

    monkeypatch.setattr(inductor_utils, "is_big_gpu", lambda index_or_device=0: True)
    _torch_api.share_template_heuristics(DEVICE, "cuda")
    a, b = cases._randn(64, 32, seed=5), cases._randn(32, 48, seed=6)
    try:
        with config.patch(max_autotune_gemm=True, max_autotune_gemm_backends="TRITON"):
            out, code = run_and_get_code(torch.compile(torch.mm, fullgraph=True), a.to(DEVICE), b.to(DEVICE))
    finally:
        registry.get_template_heuristic._devbridge_peers.pop(DEVICE)
    code = "\n".join(code)
    assert "triton_tem_" in code and "from devbridge._C import current_stream as get_raw_stream" in code
    torch.testing.assert_close(out.cpu(), a @ b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("path", ["as registered", "torch 2.11's wrapped benchmark()"])
def test_the_autotuners_benchmarker_times_plugin_work_on_the_plugin_stream(path):
    """Inductor's autotuner times every config of a kernel with the process's
    benchmarker, while devbridge's driver is active. Timed on another
    device's stream (torch 2.11 times every non-CPU kernel with CUDA events),
    plugin work reads as next to nothing; timed on the plugin's stream, a
    queued operation delayed by 3 ms takes at least that. On torch 2.13
    register() registers a benchmarker for the device; on 2.11, and here by
    request, devbridge wraps benchmark() instead."""
    from torch._inductor.runtime import benchmarking

    from devbridge.inductor import _torch_api

    if path != "as registered":
        _torch_api._wrap_benchmarker_for(DEVICE, benchmarking)
    x = torch.ones(1000, device=DEVICE)
    devbridge.triton.activate()
    try:
        with torch.simdev.op_delay(3000):
            ms = benchmarking.benchmarker.benchmark(lambda: x.add_(1), device=DEVICE, rep=20, warmup=5,
                                                    is_vetted_benchmarking=True)
    finally:
        devbridge.triton.deactivate()
    assert ms >= 3.0, ms
