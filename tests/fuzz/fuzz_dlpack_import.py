"""Fuzz target: devbridge's DLPack import, `managed_tensor_to_py_object_no_sync`,
on DLManagedTensorVersioned structs with random fields.

    tests/fuzz/run.sh                      # atheris/libFuzzer, FUZZ_SECONDS (default 60)
    python tests/fuzz/fuzz_dlpack_import.py -max_total_time=60 [corpus_dir]
    pytest tests/python/test_fuzz_smoke.py # a fixed corpus, in every CI run

Every input must end in one of two ways, never in a crash:
  * success: a torch.Tensor with the given shape (and strides), on the device
    the DLPack device maps to; the deleter has not run while it lives and runs
    exactly once when it dies;
  * failure: a Python exception, no object handed out, and the deleter not
    run: ownership stays with the caller, who deletes it (exactly what TVM-FFI,
    the reference consumer, does after a failed import: make_tensor_from_chandle
    and the callback setter call the deleter themselves, apache/tvm-ffi
    python/tvm_ffi/cython/tensor.pxi and function.pxi; an importer that also
    deleted would cause a double free there).
A DLPack major version other than 1 must be rejected ("the consumer must call
the deleter and nothing else": with the caller deleting on failure, that is
what happens).

Data is never touched: the data pointer is NULL or points into a real buffer,
and no check reads elements, so random shapes cannot make the test read wild
memory. Shape and stride arrays are honest (as long as ndim says, or NULL)
except where the fuzzer deliberately declares more dimensions than it can
back (huge ndim): then they are NULL, which a correct importer must reject
before reading.
"""

from __future__ import annotations

import ctypes
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import torch  # noqa: E402

from dlpack_ctypes import (  # noqa: E402
    DELETER,
    KDL_ASCEND,
    KDL_CPU,
    KDL_CUDA,
    KDL_EXT_DEV,
    DLManagedTensorVersioned,
    DLPackVersion,
    importer_of,
    table_from_capsule,
    take_new_reference,
)
from fuzz_inputs import ByteReader, Candidate, decode  # noqa: E402

BUFFER_BYTES = 1 << 16


class ImportFuzzer:
    """Builds managed tensors from fuzz input and checks one import each."""

    def __init__(self, table_capsule: object) -> None:
        self._import = importer_of(table_from_capsule(table_capsule))
        self._buffer = (ctypes.c_uint8 * BUFFER_BYTES)()
        self._deleted: dict[int, int] = {}  # managed tensor address -> deleter calls
        self._deleter = DELETER(self._on_delete)  # kept alive with the fuzzer
        self._privateuse1 = torch._C._get_privateuse1_backend_name()
        self.outcomes = {"imported": 0, "rejected": 0}

    def _on_delete(self, managed) -> None:
        address = ctypes.addressof(managed.contents)
        self._deleted[address] = self._deleted.get(address, 0) + 1

    def _build(self, c: Candidate):
        """The managed tensor plus every ctypes object it points into (keep them alive)."""
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(c.major, c.minor)
        managed.manager_ctx = 0x5EED
        managed.deleter = self._deleter
        managed.flags = c.flags
        keep = [managed]
        t = managed.dl_tensor
        base = ctypes.addressof(self._buffer)
        t.data = [None, base, base + 1, base + 64][c.data]
        t.device.device_type, t.device.device_id = c.device_type, c.device_id
        t.ndim = c.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = c.dtype
        for field, values in (("shape", c.shape), ("strides", c.strides)):
            if values is not None:
                # One spare slot so a zero-length array is still a real pointer.
                array = (ctypes.c_int64 * (len(values) + 1))(*values, 0)
                keep.append(array)
                setattr(t, field, ctypes.cast(array, ctypes.POINTER(ctypes.c_int64)))
        t.byte_offset = c.byte_offset
        return managed, keep

    def one_input(self, data: bytes) -> None:
        """The libFuzzer entry point: decode, then check."""
        self.check(decode(data))

    def check(self, candidate: Candidate) -> None:
        managed, keep = self._build(candidate)
        address = ctypes.addressof(managed)
        self._deleted[address] = 0
        out = ctypes.c_void_p(0)
        try:
            try:
                rc = self._import(ctypes.pointer(managed), ctypes.byref(out))
            except Exception as error:  # the importer's error, as a Python exception
                self._check_rejected(candidate, address, out, error)
                return
            if rc != 0:
                raise AssertionError(f"import returned {rc} without a Python exception: {candidate}")
            self._check_imported(candidate, address, out)
        finally:
            del self._deleted[address]
            del keep

    def _check_rejected(self, c: Candidate, address: int, out, error: Exception) -> None:
        self.outcomes["rejected"] += 1
        assert not out.value, f"a failed import handed out an object ({error!r}): {c}"
        assert self._deleted[address] == 0, (
            f"a failed import ran the deleter ({error!r}); the caller owns the tensor after a "
            f"failure and deletes it itself (TVM-FFI does), so this is a double free: {c}"
        )
        # What the caller does after a failed import: delete it, exactly once overall.
        managed = DLManagedTensorVersioned.from_address(address)
        managed.deleter(ctypes.pointer(managed))
        assert self._deleted[address] == 1

    def _check_imported(self, c: Candidate, address: int, out) -> None:
        self.outcomes["imported"] += 1
        assert out.value, f"import succeeded but handed out NULL: {c}"
        tensor = take_new_reference(out.value)
        try:
            assert isinstance(tensor, torch.Tensor), f"import returned {type(tensor)}: {c}"
            assert c.major == 1, f"imported a DLPack {c.major}.x tensor; only major 1 may be read: {c}"
            assert self._deleted[address] == 0, f"the deleter ran while the tensor lives: {c}"
            if c.shape is not None:
                assert tuple(tensor.shape) == c.shape, f"shape {tuple(tensor.shape)}: {c}"
            if c.strides is not None and c.ndim > 0 and tensor.numel() > 1:
                assert tensor.stride() == c.strides, f"strides {tensor.stride()}: {c}"
            expected_device = {
                KDL_CPU: "cpu",
                KDL_CUDA: "cuda",
                KDL_EXT_DEV: self._privateuse1,
                KDL_ASCEND: self._privateuse1,  # devbridge's transition mode
            }.get(c.device_type)
            if expected_device is not None:  # other DLPack types: whatever PyTorch maps them to
                assert tensor.device.type == expected_device, f"device {tensor.device}: {c}"
                if c.device_type != KDL_CPU:
                    assert tensor.device.index == c.device_id, f"device {tensor.device}: {c}"
        finally:
            del tensor  # the only reference: the deleter must run now
        assert self._deleted[address] == 1, (
            f"the deleter ran {self._deleted[address]} times after the tensor died: {c}"
        )


def main(argv: list[str]) -> None:
    import atheris

    import devbridge

    table = "devbridge"
    if "--table=pytorch" in argv:  # compare: PyTorch's own importer on the same inputs
        argv = [a for a in argv if a != "--table=pytorch"]
        table = "pytorch"
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        print("note: no PrivateUse1 plugin (torch_simdev) is loaded; kDLExtDev imports will fail")
    capsule = devbridge.exchange_api() if table == "devbridge" else devbridge.torch_exchange_api()
    fuzzer = ImportFuzzer(capsule)
    # libFuzzer's coverage feedback comes from Python only (devbridge's C++ is
    # not built with -fsanitize=fuzzer), and instrumenting all of torch takes
    # minutes: instrument this target's own decoding and checking, so inputs
    # that reach new field encodings or outcomes are kept and mutated further.
    for function in (decode, ByteReader.field, ByteReader.uint, ImportFuzzer.check,
                     ImportFuzzer._build, ImportFuzzer._check_rejected, ImportFuzzer._check_imported):
        atheris.instrument_func(function)
    # libFuzzer ends the process without running exit hooks: report as we go.
    def one_input_reporting(data: bytes) -> None:
        fuzzer.one_input(data)
        runs = fuzzer.outcomes["imported"] + fuzzer.outcomes["rejected"]
        if runs & (runs - 1) == 0 and runs >= 1024:  # at powers of two
            print(f"#{runs} outcomes on {table}'s table: {fuzzer.outcomes}", file=sys.stderr)

    atheris.Setup(argv, one_input_reporting)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
