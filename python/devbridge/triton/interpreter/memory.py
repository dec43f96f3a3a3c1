"""Masked memory operations for the interpreter Triton target, made safe before
Triton's interpreter sees them.

On a GPU a masked-out lane is never dereferenced, whatever its address: a
kernel may compute out-of-range offsets for the lanes its mask turns off
(`tl.atomic_add(ptr + offsets, val, mask)`). Triton's interpreter takes the
pointer, mask and value arrays to C++ (triton._C.libtriton.interpreter:
load, store, atomic_rmw, atomic_cas), and in Triton 3.6.0 and 3.7.1 (3.8.0
was not probed for it; the guard below serves it alike) atomic_rmw reads an operand broadcast from a single element (the
interpreter's own np.broadcast_to of a shape-(1,) value or mask: a view whose
strides are all zero) as a contiguous buffer, past its end: lanes get garbage
values, masked-out lanes count as active, and the process crashes on their
addresses.

During an interpreted launch devbridge's builder methods hand the interpreter
pointer, mask and value arrays that are contiguous and of the operation's
full shape, with every masked-out lane's address replaced by the address of a
scratch buffer of this module: a masked lane can never reach a wild address,
whatever the interpreter does with it. Results are the interpreter's own.

The interpreter's names it uses are listed, with the Triton versions
checked, in _triton_api (pointers are numpy uint64 arrays there).
"""

from __future__ import annotations

import numpy as np

from . import _triton_api

# Never read as data: the target of masked-out lanes (16 bytes cover every
# element type the interpreter loads or stores, aligned for atomics).
_SCRATCH = np.zeros(4, dtype=np.uint64)
_SCRATCH_ADDRESS = np.uint64(_SCRATCH.ctypes.data)


def _full(array, shape):
    """`array` contiguous and of `shape`: itself where it already is, else a copy
    (np.broadcast_to's view is read-only and, broadcast, has zero strides)."""
    array = np.asarray(array)
    if array.shape == tuple(shape) and array.flags.c_contiguous:
        return array
    return np.array(np.broadcast_to(array, shape), order="C")


def _handle_like(handle, data):
    return handle if data is handle.data else _triton_api.interpreter().TensorHandle(data, handle.dtype)


def _pointers(ptrs, mask):
    """(pointer handle, mask handle): contiguous, full shape, masked-out lanes at the scratch buffer.
    A block pointer's mask arrives as a bare numpy array (BlockPointerHandle.materialize_pointers,
    Triton 3.6 and 3.7; 3.8 lowers block pointers to plain pointers and a tl mask before the interpreter)."""
    import triton.language as tl

    TensorHandle = _triton_api.interpreter().TensorHandle  # noqa: N806 (a class)
    shape = np.shape(ptrs.data)
    raw = mask if isinstance(mask, np.ndarray) else mask.data
    if (isinstance(mask, TensorHandle) and raw.dtype == np.bool_ and raw.shape == shape and raw.flags.c_contiguous
            and ptrs.data.flags.c_contiguous and raw.all()):
        return ptrs, mask  # nothing masked and the layout already right (the common case): as they are
    mask_data = _full(np.asarray(raw, dtype=bool), shape)
    if mask_data.all():  # no lane to hide: only the layout matters
        pointer_data = _full(ptrs.data, shape)
    else:
        pointer_data = np.where(mask_data, _full(ptrs.data, shape), _SCRATCH_ADDRESS).astype(np.uint64)
    return _handle_like(ptrs, pointer_data), TensorHandle(mask_data, tl.int1)


def patch(scope) -> None:
    """Install the safe builder methods for the launch (undone by scope.restore())."""
    InterpreterBuilder = _triton_api.interpreter().InterpreterBuilder  # noqa: N806 (a class)
    load = InterpreterBuilder.create_masked_load
    store = InterpreterBuilder.create_masked_store
    atomic_rmw = InterpreterBuilder.create_atomic_rmw
    atomic_cas = InterpreterBuilder.create_atomic_cas

    def create_masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        ptrs, mask = _pointers(ptrs, mask)
        if other is not None:
            other = _handle_like(other, _full(other.data, np.shape(ptrs.data)))
        return load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        ptrs, mask = _pointers(ptrs, mask)
        value = _handle_like(value, _full(value.data, np.shape(ptrs.data)))
        return store(self, ptrs, value, mask, cache_modifier, eviction_policy)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope_):  # noqa: N803 (Triton's names)
        ptr, mask = _pointers(ptr, mask)
        val = _handle_like(val, _full(val.data, np.shape(ptr.data)))
        return atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope_)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope_):
        shape = np.shape(ptr.data)
        ptr = _handle_like(ptr, _full(ptr.data, shape))
        cmp = _handle_like(cmp, _full(cmp.data, shape))
        val = _handle_like(val, _full(val.data, shape))
        return atomic_cas(self, ptr, cmp, val, sem, scope_)

    scope.set_attr(InterpreterBuilder, "create_masked_load", create_masked_load)
    scope.set_attr(InterpreterBuilder, "create_masked_store", create_masked_store)
    scope.set_attr(InterpreterBuilder, "create_atomic_rmw", create_atomic_rmw)
    scope.set_attr(InterpreterBuilder, "create_atomic_cas", create_atomic_cas)
