"""A real CUDA kernel called through TVM-FFI on cudadev tensors runs on the
caller's current cudadev stream.

The kernel library (kernels/cudadev_add_one.cu) is compiled once per session
with TVM-FFI's C++ JIT (nvcc) into a temporary directory. Its kernels read the
stream TVM-FFI hands them, `TVMFFIEnvGetStream(kDLExtDev, id)`, and launch
there. TVM-FFI gets that stream from the DLPack exchange table on
`torch.Tensor` (`current_work_stream` of the first non-CPU tensor argument):
devbridge's table reports cudadev's live current stream; PyTorch's own table
(torch 2.11) reports NULL for kDLExtDev, so without devbridge a TVM-FFI kernel
cannot find the caller's stream.

TVM-FFI caches the table per thread the first time a thread passes a
torch.Tensor (tests/python/test_tvm_ffi_stream.py pins that down), so every
scenario runs on a fresh thread (`run_on_fresh_thread`) that sees the table on
torch.Tensor now. cudadev's current stream and CUDA's current device are per
thread too, so each scenario sets up its own streams inside that thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import shutil
import threading
import warnings
from typing import Any, Callable

import pytest
import torch

KERNEL_SOURCE = pathlib.Path(__file__).parent / "kernels" / "cudadev_add_one.cu"
MODULE_NAME = "devbridge_test_cudadev_add_one"
KDL_EXT_DEV = 12
NUMEL = 1 << 22  # 16 MiB of float32: a misordered read sees stale data
SLEEP_MS = 200
# Longer for the test that wants the kernel to finish while the producer still
# spins: the host needs time to launch it and wait for it.
WRONG_STREAM_SLEEP_MS = 300
NEEDS_TWO_GPUS = pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two GPUs (cudadev:0 and cudadev:1)"
)


def _why_this_module_cannot_run() -> str | None:
    if torch.version.cuda is None or not torch.cuda.is_available():
        return (
            f"needs a CUDA GPU: torch.cuda is not available (torch {torch.__version__}, "
            f"CUDA build {torch.version.cuda})"
        )
    try:
        import torch_cudadev  # noqa: F401
    except ImportError as error:
        return (
            f"torch_cudadev is not importable ({error}): "
            "pip install --no-build-isolation plugins/cudadev"
        )
    try:
        import tvm_ffi.cpp  # noqa: F401
    except ImportError as error:
        return f"tvm_ffi is not importable ({error}): pip install 'apache-tvm-ffi>=0.1.15'"
    try:
        import devbridge.dlpack_ctypes  # noqa: F401
    except ImportError as error:
        return f"devbridge is not importable ({error}): pip install --no-build-isolation ."
    return None


CANNOT_RUN = _why_this_module_cannot_run()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(CANNOT_RUN is not None, reason=str(CANNOT_RUN))]

if CANNOT_RUN is None:
    import tvm_ffi.cpp

    import devbridge
    from devbridge.dlpack_ctypes import Table as ExchangeTable


# ---------------------------------------------------------------- helpers


def run_on_fresh_thread(scenario: Callable[[], Any]) -> Any:
    """Run `scenario` on a new thread, which has no TVM-FFI table cache yet and
    so uses the table on torch.Tensor now. Re-raises its exception here."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["value"] = scenario()
        except BaseException as error:  # re-raised on the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=body, name="tvm-ffi-fresh-table-cache")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def devbridge_table() -> ExchangeTable:
    return ExchangeTable(devbridge.exchange_api())


def pytorch_table() -> ExchangeTable | None:
    capsule = devbridge.torch_exchange_api()
    return None if capsule is None else ExchangeTable(capsule)


def pytorch_stream_answer(device_index: int) -> int | str:
    """What PyTorch's own table answers for current_work_stream(kDLExtDev, i):
    the stream as an int (0 = NULL), or the error it reports."""
    table = pytorch_table()
    if table is None or not table.raw.current_work_stream:
        return 0  # no table / no function: TVM-FFI sets no stream either
    try:
        return table.current_stream(KDL_EXT_DEV, device_index)
    except Exception as error:  # noqa: BLE001 - the answer under test
        return f"error: {error}"


def settled(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` once every stream of its GPU has finished making it."""
    torch.cudadev.synchronize(tensor.device)
    return tensor


def require_device(device: str) -> None:
    index = torch.device(device).index
    if index >= torch.cudadev.device_count():
        pytest.skip(
            f"needs two GPUs: {device} does not exist "
            f"(torch.cudadev.device_count() = {torch.cudadev.device_count()})"
        )


@contextlib.contextmanager
def devbridge_uninstalled():
    """PyTorch's own table on torch.Tensor for the block; devbridge is put back
    afterwards if it was installed."""
    was_installed = devbridge.is_installed()
    devbridge.uninstall()
    try:
        assert not devbridge.is_installed()
        yield
    finally:
        if was_installed:
            devbridge.install()


# ---------------------------------------------------------------- fixtures


def _cuda_toolkit_home() -> str:
    """The CUDA toolkit TVM-FFI should build with. TVM-FFI takes the parent of
    the `nvcc` on PATH, which is wrong for wrapper scripts (/usr/local/bin/nvcc)
    and links no libcudart; resolve it here instead."""
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            return os.environ[variable]
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        home = pathlib.Path(nvcc).resolve().parent.parent
        if (home / "lib64").is_dir():
            return str(home)
    return "/usr/local/cuda"


def _warm_up(kernels, device: str) -> None:
    """Run every kernel the timing tests use once. CUDA loads a kernel on its
    first launch, and that load can wait for the whole GPU: inside a timing
    test it would hide (or fake) an ordering result."""
    x = torch.zeros(NUMEL, device=device)
    out = torch.empty_like(x)
    x.fill_(4.0)
    torch.full((NUMEL,), -1.0, device=device)
    torch.cudadev._sleep_on_current_stream(0, device)
    kernels.add_one_on(x, out, torch.cudadev._current_stream_handle(device))
    out.cpu()
    torch.cudadev.synchronize(device)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    if shutil.which("ninja") is None:
        pytest.skip("TVM-FFI's C++ JIT needs the ninja executable on PATH: pip install ninja")
    cuda_home = _cuda_toolkit_home()
    if not (pathlib.Path(cuda_home) / "bin" / "nvcc").exists():
        pytest.skip(f"no nvcc under {cuda_home}/bin: set CUDA_HOME to the CUDA toolkit")
    build_directory = tmp_path_factory.mktemp("tvm_ffi_cudadev_add_one")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CUDA_HOME", cuda_home)
        if not os.environ.get("TVM_FFI_CUDA_ARCH_LIST"):
            # TVM-FFI would ask nvidia-smi; torch knows the GPU already.
            major, minor = torch.cuda.get_device_capability(0)
            env.setenv("TVM_FFI_CUDA_ARCH_LIST", f"{major}.{minor}")
        module = tvm_ffi.cpp.load(
            MODULE_NAME,
            sources=[str(KERNEL_SOURCE)],
            extra_cuda_cflags=["-Xcompiler", "-Wall,-Wextra"],
            # torch has loaded its libcudart.so.13 already, which the loader
            # then shares; the rpath only matters if it has not.
            extra_ldflags=[f"-Wl,-rpath,{pathlib.Path(cuda_home) / 'lib64'}"],
            build_directory=str(build_directory),
        )
    for index in range(torch.cudadev.device_count()):
        run_on_fresh_thread(functools.partial(_warm_up, module, f"cudadev:{index}"))
    return module


@pytest.fixture
def devbridge_installed():
    """devbridge's table on torch.Tensor for the test (cudadev's import puts it
    there already; a test that uninstalled it puts it back)."""
    was_installed = devbridge.is_installed()
    if not was_installed:
        devbridge.install()
    try:
        yield
    finally:
        if not was_installed:
            devbridge.uninstall()


# ---------------------------------------------------------------- with devbridge


@pytest.mark.parametrize("device", ["cudadev:0", pytest.param("cudadev:1", marks=NEEDS_TWO_GPUS)])
def test_tvm_ffi_uses_devbridges_table(kernels, devbridge_installed, device):
    require_device(device)
    seen = run_on_fresh_thread(
        lambda: kernels.env_tensor_allocator(torch.ones(16, device=device))
    )
    assert seen != 0, "TVM-FFI installed no DLPack tensor allocator: it used no exchange table"
    assert seen == devbridge_table().raw.managed_tensor_allocator


@pytest.mark.parametrize("device", ["cudadev:0", pytest.param("cudadev:1", marks=NEEDS_TWO_GPUS)])
def test_kernel_sees_the_current_cudadev_stream_inside_a_stream_context(
    kernels, devbridge_installed, device
):
    require_device(device)
    index = torch.device(device).index

    def scenario():
        default_handle = torch.cudadev.default_stream(index).native_handle
        cuda_stream = torch.cuda.Stream(device=index)
        stream = torch.Stream(device=device)
        with torch.cuda.stream(cuda_stream), stream:
            x = torch.ones(16, device=device)
            seen = kernels.stream_of(x)
            current = torch.cudadev._current_stream_handle(index)
            cuda_current = torch.cuda.current_stream(index).cuda_stream
        return seen, stream.native_handle, current, default_handle, cuda_current

    seen, stream_handle, current, default_handle, cuda_current = run_on_fresh_thread(scenario)
    assert seen != 0, "TVM-FFI handed the kernel no stream inside a cudadev stream context"
    assert stream_handle != default_handle, "a new stream must not be the default stream"
    assert seen == stream_handle == current
    assert seen != cuda_current, "the kernel got torch.cuda's current stream, not cudadev's"


@pytest.mark.parametrize("device", ["cudadev:0", pytest.param("cudadev:1", marks=NEEDS_TWO_GPUS)])
def test_kernel_sees_the_default_stream_outside_a_stream_context(
    kernels, devbridge_installed, device
):
    require_device(device)
    index = torch.device(device).index

    def scenario():
        x = torch.ones(16, device=device)
        return kernels.stream_of(x), torch.cudadev.default_stream(index).native_handle

    seen, default_handle = run_on_fresh_thread(scenario)
    if not torch.cudadev._default_stream_is_null_stream():
        assert default_handle != 0, "cudadev's default stream is its own stream, never NULL"
    assert seen == default_handle


@pytest.mark.parametrize("device", ["cudadev:0", pytest.param("cudadev:1", marks=NEEDS_TWO_GPUS)])
def test_kernel_is_ordered_after_work_queued_on_the_callers_stream(
    kernels, devbridge_installed, device
):
    """The spin, the fill, the TVM-FFI kernel and the device-to-host read share
    one non-default cudadev stream, so the result is right without any host
    synchronisation in between."""
    require_device(device)

    def scenario():
        x = settled(torch.zeros(NUMEL, device=device))
        out = settled(torch.full((NUMEL,), -1.0, device=device))
        stream = torch.Stream(device=device)
        with stream:
            torch.cudadev._sleep_on_current_stream(SLEEP_MS, device)
            x.fill_(4.0)  # queued behind the spin
            used = kernels.add_one(x, out)
            producer_busy = not stream.query()
            result = out.cpu()  # queued on the same stream, after the kernel
        return used, stream.native_handle, producer_busy, result

    used, stream_handle, producer_busy, result = run_on_fresh_thread(scenario)
    assert used == stream_handle
    assert producer_busy, (
        "the stream had finished its spin before the kernel call returned: something waited "
        "for the GPU, so this test could not tell a right stream from a wrong one"
    )
    torch.testing.assert_close(result, torch.full((NUMEL,), 5.0))


@pytest.mark.parametrize("other", ["cudadev_default_stream", "fresh_cuda_stream"])
def test_same_kernel_on_another_stream_reads_stale_data(kernels, devbridge_installed, other):
    """The companion of the ordering test, showing that it can fail: launched
    on a stream other than the producer's, the kernel runs while the producer
    still spins and reads x before the fill (0 + 1), not after it (4 + 1)."""
    device = "cudadev:0"
    if other == "cudadev_default_stream" and torch.cudadev._default_stream_is_null_stream():
        pytest.skip(
            "CUDADEV_USE_NULL_STREAM=1 makes cudadev's default stream CUDA's legacy stream, "
            "whose ordering with other streams depends on their flags"
        )

    def scenario():
        x = settled(torch.zeros(NUMEL, device=device))
        out = settled(torch.zeros(NUMEL, device=device))
        if other == "cudadev_default_stream":
            wrong = torch.cudadev.default_stream(0)
            wrong_handle = wrong.native_handle
        else:
            wrong = torch.cuda.Stream(device=0)
            wrong_handle = wrong.cuda_stream
        producer = torch.Stream(device=device)
        with producer:
            torch.cudadev._sleep_on_current_stream(WRONG_STREAM_SLEEP_MS, device)
            x.fill_(4.0)  # queued behind the spin
            used = kernels.add_one_on(x, out, wrong_handle)
        wrong.synchronize()  # the kernel only
        producer_busy = not producer.query()
        torch.cudadev.synchronize(device)  # both streams, so the read is no race
        return used, wrong_handle, producer.native_handle, producer_busy, out.cpu()

    used, wrong_handle, producer_handle, producer_busy, result = run_on_fresh_thread(scenario)
    assert used == wrong_handle != producer_handle
    assert producer_busy, (
        f"the kernel on the other stream finished only after the producer's "
        f"{WRONG_STREAM_SLEEP_MS} ms spin: the host or GPU serialised the two streams, so "
        "this test cannot show a wrong-stream launch"
    )
    values = sorted(set(result.unique().tolist()))
    assert values == [1.0], (
        f"the kernel on the other stream should have read x before the fill (x + 1 == 1), "
        f"got {values}"
    )


@NEEDS_TWO_GPUS
def test_tensor_on_device_1_while_device_0_is_current(kernels, devbridge_installed):
    """TVM-FFI asks for the stream of the tensor's device, not the current one,
    and the kernel runs on the tensor's GPU and gives the caller its device back."""
    require_device("cudadev:1")

    def scenario():
        x = settled(torch.zeros(NUMEL, device="cudadev:1"))
        out = settled(torch.full((NUMEL,), -1.0, device="cudadev:1"))
        stream_1 = torch.Stream(device="cudadev:1")
        with stream_1:  # makes device 1 current, and stream_1 its current stream
            with torch.cudadev.device(0):
                current_before = torch.cudadev.current_device()
                stream_0 = torch.cudadev._current_stream_handle(0)
                torch.cudadev._sleep_on_current_stream(SLEEP_MS, 1)
                x.fill_(4.0)  # queued behind the spin, on device 1's current stream
                seen = kernels.stream_of(x)
                used = kernels.add_one(x, out)
                current_after = torch.cudadev.current_device()
                stream_device = kernels.stream_device(seen)
                producer_busy = not stream_1.query()
                result = out.cpu()  # on device 1's current stream, after the kernel
        return (current_before, current_after, stream_0, seen, used, stream_1.native_handle,
                stream_device, producer_busy, result)

    (current_before, current_after, stream_0, seen, used, stream_1_handle, stream_device,
     producer_busy, result) = run_on_fresh_thread(scenario)
    assert current_before == 0
    assert seen == used == stream_1_handle != stream_0
    assert stream_device == 1, "the kernel's stream must belong to the tensor's GPU"
    assert current_after == 0, "the kernel call must restore the caller's current device"
    assert producer_busy, "something waited for the GPU: the ordering check below proves nothing"
    torch.testing.assert_close(result, torch.full((NUMEL,), 5.0))


def test_kernel_rejects_bad_arguments_with_the_reason(kernels, devbridge_installed):
    device = "cudadev:0"

    def scenario():
        x = torch.ones(64, device=device)
        with pytest.raises(ValueError, match="x must be a cudadev tensor .*kDLExtDev"):
            kernels.add_one(torch.ones(64), torch.empty_like(x))
        with pytest.raises(TypeError, match="x must be float32"):
            kernels.add_one(x.double(), torch.empty_like(x))
        with pytest.raises(ValueError, match="x must be contiguous"):
            kernels.add_one(x[::2], torch.empty(32, device=device))
        with pytest.raises(ValueError, match="same number of elements, got 64 and 32"):
            kernels.add_one(x, torch.empty(32, device=device))

    run_on_fresh_thread(scenario)


@NEEDS_TWO_GPUS
def test_kernel_rejects_a_stream_of_another_gpu(kernels, devbridge_installed):
    require_device("cudadev:1")

    def scenario():
        x = torch.ones(64, device="cudadev:0")
        stream_of_gpu_1 = torch.cudadev._current_stream_handle(1)
        with pytest.raises(
            ValueError, match="belongs to CUDA device 1, but the tensors are on cudadev:0"
        ):
            kernels.add_one_on(x, torch.empty_like(x), stream_of_gpu_1)
        with pytest.raises(ValueError, match="x and out must be on the same cudadev device"):
            kernels.add_one(x, torch.empty(64, device="cudadev:1"))

    run_on_fresh_thread(scenario)


# ---------------------------------------------------------------- with and without devbridge


def test_without_devbridge_the_kernel_sees_pytorchs_answer_and_with_it_the_live_stream(
    kernels, devbridge_installed
):
    """The bug devbridge fixes: PyTorch's own table answers NULL for kDLExtDev
    (torch 2.11, measured), so TVM-FFI hands the kernel no stream even inside a
    cudadev stream context. A torch whose table reports the stream is checked
    for agreement instead, and the test says so."""
    index = 0
    device = f"cudadev:{index}"

    def scenario():
        stream = torch.Stream(device=device)
        with stream:
            x = torch.ones(16, device=device)
            pytorch_answer = pytorch_stream_answer(index)
            seen = kernels.stream_of(x)
            allocator = kernels.env_tensor_allocator(x)
            refusal = None
            if seen == 0:
                try:
                    kernels.add_one(x, torch.empty_like(x))
                except RuntimeError as error:
                    refusal = str(error)
        return pytorch_answer, seen, allocator, refusal, stream.native_handle

    with devbridge_uninstalled():
        without = run_on_fresh_thread(scenario)
    assert devbridge.is_installed(), "devbridge_uninstalled() must put devbridge back"
    with_devbridge = run_on_fresh_thread(scenario)  # a fresh thread sees devbridge's table

    _, seen, allocator, _, stream_handle = with_devbridge
    assert stream_handle != 0
    assert seen == stream_handle, "with devbridge the kernel must see the live cudadev stream"
    assert allocator == devbridge_table().raw.managed_tensor_allocator

    pytorch_answer, seen, allocator, refusal, stream_handle = without
    table = pytorch_table()
    if table is not None and table.raw.managed_tensor_allocator:
        assert allocator == table.raw.managed_tensor_allocator, (
            "TVM-FFI did not use PyTorch's table"
        )
    if pytorch_answer == 0 or isinstance(pytorch_answer, str):
        assert seen == 0, (
            f"PyTorch's table answered {pytorch_answer!r} for kDLExtDev, yet the kernel saw "
            f"{seen:#x}"
        )
        assert refusal is not None and "devbridge.install()" in refusal, (
            f"add_one without a stream must refuse and name the fix, got {refusal!r}"
        )
    else:
        assert seen == pytorch_answer, "TVM-FFI must hand the kernel what PyTorch's table reports"
        warnings.warn(
            f"torch {torch.__version__}'s own exchange table reports cudadev streams "
            f"(current_work_stream(kDLExtDev, {index}) = {pytorch_answer:#x}, the current stream "
            f"is {stream_handle:#x}): the NULL-stream bug does not reproduce; checked that "
            "TVM-FFI hands the kernel PyTorch's answer instead",
            UserWarning,
            stacklevel=1,
        )
