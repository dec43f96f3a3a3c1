"""What the fuzzer needs of the DLPack ABI.

The struct layouts come from devbridge.dlpack_ctypes, the project's one ctypes
mirror of dlpack.h v1.3; this module only adds the importer as a plain
callable, so the fuzzer can aim at any table (devbridge's or PyTorch's).
"""

from __future__ import annotations

from devbridge.dlpack_ctypes import (  # noqa: F401  (re-exported for the fuzzer)
    DELETER,
    EXCHANGE_CAPSULE,
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    FLAG_SUBBYTE_PADDED as FLAG_IS_SUBBYTE_TYPE_PADDED,
    KDL_ASCEND,
    KDL_CPU,
    KDL_CUDA,
    KDL_EXT_DEV,
    TO_PY,
    DLManagedTensorVersioned,
    DLPackExchangeAPI,
    DLPackVersion,
    capsule_pointer,
    steal_reference as take_new_reference,
)


def table_from_capsule(capsule: object) -> DLPackExchangeAPI:
    return DLPackExchangeAPI.from_address(capsule_pointer(capsule, EXCHANGE_CAPSULE))


def importer_of(table: DLPackExchangeAPI):
    """The table's managed_tensor_to_py_object_no_sync as a Python callable."""
    if not table.managed_tensor_to_py_object_no_sync:
        raise ValueError("the table's managed_tensor_to_py_object_no_sync is NULL")
    return TO_PY(table.managed_tensor_to_py_object_no_sync)
