"""Checks of devbridge's DLPack exchange table on the plugin's device.

These go through the table exactly as a C consumer (TVM-FFI) does: function
pointers read out of the PyCapsule on ``torch.Tensor``.
"""

from __future__ import annotations

import ctypes

import torch

from .. import dlpack_ctypes as abi
from .native_stream import NATIVE_HANDLE_FIX, require_native_stream
from .plugin import Backend
from .registry import check
from .result import CheckFailed, CheckResult

_INSTALL_FIX = (
    "call devbridge.install() when the plugin's package is imported (three lines: docs/plugin-authors.md), "
    "which torch's autoload does and a process with TORCH_DEVICE_BACKEND_AUTOLOAD=0 does itself; users of an "
    "unmodified plugin call devbridge.install() once"
)


def _devbridge():
    try:
        import devbridge
    except ImportError as exc:
        raise CheckFailed(f"devbridge cannot be imported: {exc}",
                          "build and install it: pip install --no-build-isolation <devbridge checkout>") from exc
    return devbridge


def _our_table() -> abi.Table:
    return abi.Table(_devbridge().exchange_api())


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _what_torch_serves(backend: Backend, table: abi.Table) -> list[str]:
    """What PyTorch's own table and Python protocol give for the plugin's
    tensors in this process, measured (it differs between torch versions
    and between plugins): a line for each, as the failure's notes."""
    index = torch.accelerator.current_device_index()
    device = torch.device(backend.name, index)
    side = torch.Stream(device=device)
    with side:
        try:
            seen = table.current_stream(abi.KDL_EXT_DEV, index)
        except Exception as exc:  # noqa: BLE001 - what the consumer would get is the finding
            stream = f"its current_work_stream(kDLExtDev, {index}) raised {_first_line(exc)}"
        else:
            try:
                want = side.native_handle
            except Exception as exc:  # noqa: BLE001
                stream = (f"its current_work_stream(kDLExtDev, {index}) gave {seen:#x}, and torch.Stream.native_handle "
                          f"raised {_first_line(exc)}")
            else:
                if seen == want:
                    stream = (f"its current_work_stream(kDLExtDev, {index}) gave the live stream {seen:#x} of "
                              f"{device} (a new stream, made current)")
                elif seen == 0:
                    stream = (f"its current_work_stream(kDLExtDev, {index}) gave NULL (the default stream) while a "
                              f"new stream {want:#x} was current on {device}")
                else:
                    stream = (f"its current_work_stream(kDLExtDev, {index}) gave {seen:#x} while a new stream "
                              f"{want:#x} was current on {device}")
    tensor = torch.ones(4, device=device)
    try:
        torch.from_dlpack(tensor)
    except Exception as exc:  # noqa: BLE001
        protocol = f"torch.from_dlpack of a {backend.name} tensor raised {_first_line(exc)}"
    else:
        protocol = f"torch.from_dlpack of a {backend.name} tensor worked"
    return [f"measured here: {stream}", f"measured here: {protocol}"]


@check("dlpack.installed", "DLPack exchange table installed on torch.Tensor")
def _installed(backend: Backend, result: CheckResult) -> None:
    devbridge = _devbridge()
    current = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    if current is None:
        raise CheckFailed("torch.Tensor has no __dlpack_c_exchange_api__: DLPack consumers find no exchange table",
                          _INSTALL_FIX)
    table = abi.Table(current)
    if table.address != _our_table().address:
        raise CheckFailed(
            "torch.Tensor.__dlpack_c_exchange_api__ is PyTorch's own table, not devbridge's (devbridge.install() "
            "was not called)", _INSTALL_FIX, notes=_what_torch_serves(backend, table))
    result.detail = f"devbridge {devbridge.__version__}; other devices delegate to PyTorch's table"


@check("dlpack.version", "exchange table version and functions")
def _version(backend: Backend, result: CheckResult) -> None:
    table = _our_table()
    if table.version != (1, 3):
        raise CheckFailed(f"table version is {table.version}, expected DLPack (1, 3)",
                          "rebuild devbridge against torch's DLPack 1.3 header")
    missing = [name for name, _ in abi.DLPackExchangeAPI._fields_[1:]
               if not getattr(table.raw, name)]
    if missing:
        raise CheckFailed(f"NULL functions in the table: {', '.join(missing)}",
                          "this is a devbridge bug: please report it")
    result.detail = "DLPack 1.3, all five functions present"


# Not on stream.native_handle: a plugin without torch's handle may still serve
# devbridge through a stream resolver (then only that check fails).
@check("dlpack.stream", "current_work_stream is the plugin's live stream",
       depends_on=("dlpack.version", "stream.current"))
def _live_stream(backend: Backend, result: CheckResult) -> None:
    from devbridge import _C

    table = _our_table()
    source = require_native_stream(backend, torch.accelerator.current_device_index())

    def expected(stream: torch.Stream, index: int) -> int:
        # The truth to compare with: torch's own handle, or, for a plugin that
        # has none, what its resolver says of the current stream's id.
        if source == "resolver":
            return _C._stream_native_handle(backend.name, index, stream.stream_id)
        try:
            return stream.native_handle
        except RuntimeError as exc:
            raise CheckFailed(f"torch.Stream.native_handle raised: {exc}", NATIVE_HANDLE_FIX) from exc

    for index in range(torch.accelerator.device_count()):
        device = torch.device(backend.name, index)
        side = torch.Stream(device=device)
        for stream in (torch.accelerator.current_stream(device), side):
            with stream:
                try:
                    seen = table.current_stream(abi.KDL_EXT_DEV, index)
                except RuntimeError as exc:
                    raise CheckFailed(f"current_work_stream(kDLExtDev, {index}) failed: {exc}",
                                      NATIVE_HANDLE_FIX) from exc
                want = expected(stream, index)
            if seen != want:
                raise CheckFailed(
                    f"current_work_stream(kDLExtDev, {index}) gave {seen:#x}, but the current "
                    f"stream of {device} is {want:#x}",
                    "the plugin's getStream() must return the current stream set through "
                    "exchangeStream(), per thread and device"
                    + (", and its current-stream query the same stream"
                       if source == "current-stream-query" else ""),
                )
    if table.current_stream(abi.KDL_CPU, 0) != 0:
        raise CheckFailed("current_work_stream(kDLCPU) is not NULL", "devbridge bug: please report it")
    route = {"guard": "the guard's native handle", "resolver": "the plugin's stream resolver",
             "current-stream-query": "the plugin's current-stream query"}[source]
    result.detail = (f"matched live streams on {torch.accelerator.device_count()} device(s), "
                     f"through {route}")
    # Timed in a C loop: what a kernel library pays per call (ctypes would
    # add ~0.5 us of its own).
    samples = sorted(_C._time_current_work_stream(_devbridge().exchange_api(), abi.KDL_EXT_DEV, 0,
                                                  200_000) for _ in range(5))
    result.costs_ns["current_work_stream(kDLExtDev)"] = samples[len(samples) // 2]


@check("dlpack.roundtrip", "export and import of a plugin tensor (zero copy)",
       depends_on=("dlpack.version", "allocator"))
def _roundtrip(backend: Backend, result: CheckResult) -> None:
    table = _our_table()
    device = torch.device(backend.name, torch.accelerator.current_device_index())
    source = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6)[:, 1:5]
    managed = table.export(source)
    dl = managed.contents.dl_tensor
    if dl.device.device_type != abi.KDL_EXT_DEV or dl.device.device_id != device.index:
        managed.contents.deleter(managed)
        raise CheckFailed(
            f"exported device is ({dl.device.device_type}, {dl.device.device_id}), expected "
            f"(kDLExtDev=12, {device.index})", "devbridge bug: please report it")
    back = table.to_py(managed)
    if back.device != device or back.data_ptr() != source.data_ptr() or not torch.equal(back.cpu(), source.cpu()):
        raise CheckFailed(
            f"import gave {back.device}, data_ptr {back.data_ptr():#x} (source {source.data_ptr():#x})",
            "the round trip must alias the same device memory; check the plugin's "
            "as_strided/empty kernels and getDeviceFromPtr hook")
    result.detail = "non-contiguous view, same memory after the round trip"


@check("dlpack.allocator", "managed_tensor_allocator on the plugin device",
       depends_on=("dlpack.version", "allocator"))
def _allocator(backend: Backend, result: CheckResult) -> None:
    table = _our_table()
    index = torch.accelerator.current_device_index()
    shape = (ctypes.c_int64 * 2)(3, 5)
    prototype = abi.DLTensor(
        data=None, device=abi.DLDevice(abi.KDL_EXT_DEV, index), ndim=2,
        dtype=abi.DLDataType(2, 32, 1), shape=shape, strides=None, byte_offset=0)
    errors: list[str] = []

    @abi.SET_ERROR
    def set_error(_ctx, kind, message):
        errors.append(f"{kind.decode()}: {message.decode()}")

    out = abi.MANAGED_PTR()
    rc = table.allocator(ctypes.byref(prototype), ctypes.byref(out), None, set_error)
    if rc != 0 or not out:
        raise CheckFailed(
            f"the allocator failed: {'; '.join(errors) or 'no message'}",
            "the plugin's empty.memory_format kernel and allocator must work from any thread")
    tensor = out.contents.dl_tensor
    ok = (tensor.device.device_type == abi.KDL_EXT_DEV and tensor.device.device_id == index
          and tensor.ndim == 2 and tensor.shape[0] == 3 and tensor.shape[1] == 5 and tensor.data)
    out.contents.deleter(out)
    if not ok:
        raise CheckFailed("the allocated tensor does not match the prototype",
                          "devbridge bug: please report it")
    result.detail = f"3x5 float32 on {backend.name}:{index}, freed through its deleter"
