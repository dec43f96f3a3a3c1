"""A real TVM-FFI kernel on simdev tensors runs on the caller's stream.

The kernel (tests/python/kernels/simdev_add_one.cc) is compiled here with
TVM-FFI's C++ JIT against tvm-ffi's headers and simdev's C runtime. It reads
the stream TVM-FFI hands it, `TVMFFIEnvGetStream(kDLExtDev, id)`, and queues
its work there with `sdLaunchHostFunc`. TVM-FFI gets that stream from the
DLPack exchange table on `torch.Tensor` (`current_work_stream` of the first
non-CPU tensor argument) and installs that table's allocator in its
environment, which the kernel also reports: that is how these tests know
which table TVM-FFI used.

TVM-FFI caches the table per (thread, tensor type) the first time a thread
passes a torch.Tensor (tvm_ffi/cython/tvm_ffi_python_helpers.h: a
`thread_local TVMFFIPyCallManager` whose `arg_dispatch_map_` keeps the setter
with its table pointer). Installing or uninstalling devbridge afterwards does
not change what that thread uses, so every scenario runs on a fresh thread
(`run_on_fresh_thread`); test_tvm_ffi_keeps_the_table_a_thread_saw_first pins
that behaviour down.
"""

from __future__ import annotations

import contextlib
import ctypes
import pathlib
import threading
from typing import Any, Callable

import pytest
import torch

tvm_ffi = pytest.importorskip(
    "tvm_ffi", reason="apache-tvm-ffi is not installed: pip install 'apache-tvm-ffi>=0.1.15'"
)
torch_simdev = pytest.importorskip(
    "torch_simdev",
    reason="the simdev reference plugin is not installed: "
    "pip install --no-build-isolation plugins/simdev",
)
import tvm_ffi.cpp  # noqa: E402

import devbridge  # noqa: E402

KERNEL_SOURCE = pathlib.Path(__file__).parent / "kernels" / "simdev_add_one.cc"
SIMDEV_DEVICES = ["simdev:0", "simdev:1"]
KDL_EXT_DEV = 12
# Each queued simdev op sleeps this long first, so work queued on the wrong
# stream reads stale data deterministically instead of by luck.
OP_DELAY_US = 20_000
NUMEL = 1024


# ---------------------------------------------------------------- the tables


class ExchangeTable(ctypes.Structure):
    """DLPackExchangeAPI (dlpack.h v1.3), function pointers as addresses."""

    _fields_ = [
        ("version_major", ctypes.c_uint32),
        ("version_minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


_CURRENT_WORK_STREAM = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)


def table_of(capsule: object) -> ExchangeTable:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return ExchangeTable.from_address(get_pointer(capsule, b"dlpack_exchange_api"))


def devbridge_table() -> ExchangeTable:
    return table_of(devbridge.exchange_api())


def pytorch_table() -> ExchangeTable:
    return table_of(devbridge.torch_exchange_api())


def stream_reported_by(table: ExchangeTable, device: str) -> int:
    """The table's own current_work_stream answer for a simdev device."""
    stream = ctypes.c_void_p()
    index = torch.device(device).index
    assert _CURRENT_WORK_STREAM(table.current_work_stream)(KDL_EXT_DEV, index, ctypes.byref(stream)) == 0
    return stream.value or 0


@contextlib.contextmanager
def exchange_table(installed: bool):
    """Put devbridge's table (installed=True) or PyTorch's on torch.Tensor for
    the block, then restore whatever was there."""
    was_installed = devbridge.is_installed()
    (devbridge.install if installed else devbridge.uninstall)()
    try:
        expected = devbridge_table() if installed else pytorch_table()
        on_tensor = table_of(torch.Tensor.__dlpack_c_exchange_api__)
        assert ctypes.addressof(on_tensor) == ctypes.addressof(expected)
        yield
    finally:
        (devbridge.install if was_installed else devbridge.uninstall)()


# ---------------------------------------------------------------- helpers


def run_on_fresh_thread(scenario: Callable[[], Any]) -> Any:
    """Run `scenario` on a new thread, which has no TVM-FFI dispatch cache yet
    and so uses the table on torch.Tensor now. Re-raises its exception here."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["value"] = scenario()
        except BaseException as error:  # re-raised on the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=body, name="tvm-ffi-fresh-dispatch-cache")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def simdev_op_delay(microseconds: int):
    torch.simdev.set_op_delay_us(microseconds)
    try:
        yield
    finally:
        torch.simdev.set_op_delay_us(0)


def settled_full(device: str, value: float) -> torch.Tensor:
    """A tensor whose initialisation has finished on every stream of `device`."""
    tensor = torch.full((NUMEL,), value, dtype=torch.float32, device=device)
    torch.accelerator.synchronize(device)
    return tensor


def queue_producers(x: torch.Tensor) -> None:
    """Four ops on the current stream; with the delay, x == 4 only after ~80 ms."""
    x.fill_(1.0)
    for _ in range(3):
        x.add_(1.0)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def kernels():
    runtime_library = pathlib.Path(torch_simdev.runtime_library_path())
    return tvm_ffi.cpp.load(
        "devbridge_test_simdev_add_one",
        sources=[str(KERNEL_SOURCE)],
        extra_cflags=["-Wall", "-Wextra", "-Werror"],
        extra_include_paths=[torch_simdev.get_include()],
        # Link the very runtime torch_simdev loaded: the dynamic loader then
        # shares one instance, so the stream handles mean the same streams.
        extra_ldflags=[str(runtime_library), f"-Wl,-rpath,{runtime_library.parent}"],
    )


@pytest.fixture
def devbridge_installed():
    with exchange_table(installed=True):
        yield


@pytest.fixture
def pytorch_table_installed():
    with exchange_table(installed=False):
        yield


# ---------------------------------------------------------------- with devbridge


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_tvm_ffi_uses_devbridges_table(kernels, devbridge_installed, device):
    seen = run_on_fresh_thread(
        lambda: kernels.env_tensor_allocator(torch.ones(NUMEL, device=device))
    )
    assert seen == devbridge_table().managed_tensor_allocator
    assert seen != pytorch_table().managed_tensor_allocator


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_kernel_sees_the_callers_non_default_stream(kernels, devbridge_installed, device):
    def scenario():
        default_handle = torch.accelerator.current_stream(device).native_handle
        stream = torch.Stream(device=device)
        with stream:
            x = torch.ones(NUMEL, device=device)
            seen = kernels.current_stream(x)
            current = torch.accelerator.current_stream(device).native_handle
        return seen, stream.native_handle, current, default_handle

    seen, stream_handle, current_handle, default_handle = run_on_fresh_thread(scenario)
    assert stream_handle != default_handle, "a new stream must not be the default stream"
    assert seen == stream_handle == current_handle


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_kernel_sees_the_default_stream_outside_a_stream_context(
    kernels, devbridge_installed, device
):
    def scenario():
        x = torch.ones(NUMEL, device=device)
        return kernels.current_stream(x), torch.accelerator.current_stream(device).native_handle

    seen, default_handle = run_on_fresh_thread(scenario)
    assert default_handle != 0, "simdev's default stream is a real stream, never NULL"
    assert seen == default_handle


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_kernel_is_ordered_between_producers_and_the_read(kernels, devbridge_installed, device):
    """Producers, the kernel and the D2H read share one non-default stream, so
    the result is right without any host synchronisation in between."""

    def scenario():
        x = settled_full(device, 0.0)
        out = settled_full(device, -1.0)
        with simdev_op_delay(OP_DELAY_US):
            stream = torch.Stream(device=device)
            with stream:
                queue_producers(x)
                used = kernels.add_one(x, out)
                result = out.cpu()  # queued on the same stream, after the kernel
        return used, stream.native_handle, result

    used, stream_handle, result = run_on_fresh_thread(scenario)
    assert used == stream_handle
    torch.testing.assert_close(result, torch.full((NUMEL,), 5.0))


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_same_kernel_on_the_default_stream_reads_stale_data(kernels, devbridge_installed, device):
    """The companion of the ordering test, showing that test can fail: queued
    on the default stream instead, the kernel runs while the producers on the
    caller's stream still sleep, and reads x as 0 or 1, not 4."""

    def scenario():
        x = settled_full(device, 0.0)
        out = settled_full(device, -1.0)
        with simdev_op_delay(OP_DELAY_US):
            stream = torch.Stream(device=device)
            with stream:
                queue_producers(x)
                used = kernels.add_one_on_default_stream(x, out)
            default_handle = torch.accelerator.current_stream(device).native_handle
            # Wait for both streams, so the read below is not itself a race.
            torch.accelerator.synchronize(device)
            result = out.cpu()
        return used, default_handle, result

    used, default_handle, result = run_on_fresh_thread(scenario)
    assert used == default_handle
    values = set(result.unique().tolist())
    assert values <= {1.0, 2.0}, (
        f"the kernel on the default stream should have read x before the producers ran "
        f"(x + 1 in {{1, 2}}), got {sorted(values)}"
    )


# ---------------------------------------------------------------- without devbridge


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_with_pytorchs_table_the_kernel_sees_pytorchs_answer(
    kernels, pytorch_table_installed, device
):
    """TVM-FFI hands the kernel exactly what the installed table reports."""

    def scenario():
        stream = torch.Stream(device=device)
        with stream:
            x = torch.ones(NUMEL, device=device)
            return (
                kernels.current_stream(x),
                stream_reported_by(pytorch_table(), device),
                kernels.env_tensor_allocator(x),
            )

    seen, pytorch_answer, allocator = run_on_fresh_thread(scenario)
    assert allocator == pytorch_table().managed_tensor_allocator
    assert seen == pytorch_answer


@pytest.mark.parametrize("device", SIMDEV_DEVICES)
def test_with_pytorchs_table_the_kernel_sees_no_stream(kernels, pytorch_table_installed, device):
    """The bug devbridge fixes: a PyTorch whose table answers NULL for
    kDLExtDev makes TVM-FFI hand the kernel no stream, even inside a stream
    context. Newer PyTorch builds answer with the backend's stream through
    c10's generic stream interface; there the bug does not exist to show."""

    def scenario():
        stream = torch.Stream(device=device)
        with stream:
            x = torch.ones(NUMEL, device=device)
            pytorch_answer = stream_reported_by(pytorch_table(), device)
            if pytorch_answer:
                return pytorch_answer, None, stream.native_handle
            seen = kernels.current_stream(x)
            with pytest.raises(RuntimeError, match=r"devbridge\.install\(\)"):
                kernels.add_one(x, torch.empty_like(x))
        return pytorch_answer, seen, stream.native_handle

    pytorch_answer, seen, stream_handle = run_on_fresh_thread(scenario)
    if pytorch_answer:
        assert pytorch_answer == stream_handle, "PyTorch reports a stream, but not the current one"
        pytest.skip(
            f"torch {torch.__version__}'s own exchange table already reports PrivateUse1 "
            f"streams (current_work_stream(kDLExtDev, {torch.device(device).index}) = "
            f"{pytorch_answer:#x}, the current stream): the NULL-stream bug does not reproduce"
        )
    assert stream_handle != 0
    assert seen == 0


def test_tvm_ffi_keeps_the_table_a_thread_saw_first(kernels):
    """Why every scenario above runs on a fresh thread: TVM-FFI binds a thread
    to the table it saw on its first torch.Tensor argument. If TVM-FFI stops
    caching, this fails and the fresh-thread workaround can go."""
    device = SIMDEV_DEVICES[0]

    def table_used() -> int:
        return kernels.env_tensor_allocator(torch.ones(NUMEL, device=device))

    def scenario():
        with exchange_table(installed=True):
            first = table_used()
        with exchange_table(installed=False):
            after_uninstall = table_used()
            on_fresh_thread = run_on_fresh_thread(table_used)
        return first, after_uninstall, on_fresh_thread

    first, after_uninstall, on_fresh_thread = run_on_fresh_thread(scenario)
    devbridge_allocator = devbridge_table().managed_tensor_allocator
    assert first == devbridge_allocator
    assert after_uninstall == devbridge_allocator, "the thread kept devbridge's table"
    assert on_fresh_thread == pytorch_table().managed_tensor_allocator, (
        "a fresh thread uses PyTorch's table"
    )
