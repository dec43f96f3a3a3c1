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

Active lanes are checked before the interpreter sees them: an active lane
whose element, [address, address + element size), is not mapped memory of
this process (writable memory for a store or an atomic) would be dereferenced
by the interpreter's C++ and kill the process with SIGSEGV, where a GPU
raises an illegal-address fault. The operation raises IllegalMemoryAccessError
instead, naming the operation, how many lanes, the first bad address and what
to check; run_program (interpreter.py) adds the kernel's name, the program and
the source line, and the launch fails at the stream's next synchronization.
The check is address_space's (Linux's /proc/self/maps, read once and again on
a miss; mapping granularity, as a GPU's fault is page granular; nothing is
checked where the system has no /proc/self/maps). It costs one min and max of
the active addresses per operation in the common case: about 5 us for 1024
lanes, 1-2% of an interpreted Inductor layernorm or pointwise kernel.

The interpreter's names it uses are listed, with the Triton versions
checked, in _triton_api (pointers are numpy uint64 arrays there).
"""

from __future__ import annotations

import numpy as np

from . import _triton_api
from . import address_space

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


class IllegalMemoryAccessError(RuntimeError):
    """An active lane of a load, store or atomic at an address that is not
    mapped memory (or not writable, for a store or an atomic): what a GPU
    reports as an illegal memory access. A RuntimeError, as torch reports a
    device's illegal-address fault, rather than an IndexError: the address
    may come from any pointer arithmetic, not only an index, and the kernel's
    launch fails as a whole."""


# Operation names as a kernel writes them, by the interpreter's RMW op name (ir.ATOMIC_OP).
_ATOMIC_NAMES = {"ADD": "tl.atomic_add", "FADD": "tl.atomic_add", "AND": "tl.atomic_and", "OR": "tl.atomic_or",
                 "XOR": "tl.atomic_xor", "XCHG": "tl.atomic_xchg", "MAX": "tl.atomic_max", "UMAX": "tl.atomic_max",
                 "MIN": "tl.atomic_min", "UMIN": "tl.atomic_min"}
_element_sizes: dict = {}  # tl element type -> bytes the interpreter loads per lane


def _load_size(ptrs) -> int:
    """What the interpreter's load reads per lane: the element type create_masked_load passes it."""
    element = ptrs.get_element_ty()
    size = _element_sizes.get(element)
    if size is None:
        size = _element_sizes[element] = np.dtype(_triton_api.interpreter()._get_np_dtype(element)).itemsize
    return size


def _check(operation: str, pointers: np.ndarray, active, size: int, write: bool) -> None:
    """Raise IllegalMemoryAccessError unless every active lane's element is mapped memory (writable when `write`)."""
    bad = address_space.unmapped(pointers, active, size, write)
    if bad is None:
        return
    count, first, read_only = bad
    total = pointers.size if active is None else int(np.count_nonzero(active))
    raise IllegalMemoryAccessError(
        f"devbridge: illegal memory access: {operation} of {size}-byte elements, {count} of its {total} active lanes at "
        f"addresses outside this process's {'writable' if write else 'readable'} memory, the first at {first:#x}"
        f"{' (read-only memory)' if read_only else ''}. On a GPU this access faults (CUDA: 'an illegal "
        "memory access was encountered'); the interpreter refuses it instead of dereferencing it. Usually an "
        "offset past the end of the tensor or below its start, or a mask that lets such a lane through: check "
        "this access's offsets (and any index loaded to compute them) against the tensor's size, and that its "
        "mask is false for every lane that can go out of range (masked-out lanes may hold any address)"
        + (", and that a store or atomic does not target read-only memory" if read_only else ""))


def _pointers(ptrs, mask, operation: str, size: int, write: bool):
    """(pointer handle, mask handle): contiguous, full shape, masked-out lanes at the scratch buffer,
    every active lane checked (_check). A block pointer's mask arrives as a bare numpy array
    (BlockPointerHandle.materialize_pointers, Triton 3.6 and 3.7; 3.8 lowers block pointers to plain
    pointers and a tl mask before the interpreter)."""
    import triton.language as tl

    TensorHandle = _triton_api.interpreter().TensorHandle  # noqa: N806 (a class)
    shape = np.shape(ptrs.data)
    raw = mask if isinstance(mask, np.ndarray) else mask.data
    if (isinstance(mask, TensorHandle) and raw.dtype == np.bool_ and raw.shape == shape and raw.flags.c_contiguous
            and ptrs.data.flags.c_contiguous and raw.all()):
        _check(operation, ptrs.data, None, size, write)
        return ptrs, mask  # nothing masked and the layout already right (the common case): as they are
    mask_data = _full(np.asarray(raw, dtype=bool), shape)
    pointer_data = _full(ptrs.data, shape)
    every_lane = mask_data.all()
    _check(operation, pointer_data, None if every_lane else mask_data, size, write)
    if not every_lane:  # else no lane to hide: only the layout mattered
        pointer_data = np.where(mask_data, pointer_data, _SCRATCH_ADDRESS).astype(np.uint64)
    return _handle_like(ptrs, pointer_data), TensorHandle(mask_data, tl.int1)


def patch(scope) -> None:
    """Install the safe builder methods for the launch (undone by scope.restore())."""
    InterpreterBuilder = _triton_api.interpreter().InterpreterBuilder  # noqa: N806 (a class)
    load = InterpreterBuilder.create_masked_load
    store = InterpreterBuilder.create_masked_store
    atomic_rmw = InterpreterBuilder.create_atomic_rmw
    atomic_cas = InterpreterBuilder.create_atomic_cas

    def create_masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        ptrs, mask = _pointers(ptrs, mask, "tl.load", _load_size(ptrs), write=False)
        if other is not None:
            other = _handle_like(other, _full(other.data, np.shape(ptrs.data)))
        return load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        ptrs, mask = _pointers(ptrs, mask, "tl.store", np.asarray(value.data).dtype.itemsize, write=True)
        value = _handle_like(value, _full(value.data, np.shape(ptrs.data)))
        return store(self, ptrs, value, mask, cache_modifier, eviction_policy)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope_):  # noqa: N803 (Triton's names)
        operation = _ATOMIC_NAMES.get(getattr(rmwOp, "name", None), f"atomic {rmwOp}")
        ptr, mask = _pointers(ptr, mask, operation, np.asarray(val.data).dtype.itemsize, write=True)
        val = _handle_like(val, _full(val.data, np.shape(ptr.data)))
        return atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope_)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope_):
        shape = np.shape(ptr.data)
        ptr = _handle_like(ptr, _full(ptr.data, shape))
        cmp = _handle_like(cmp, _full(cmp.data, shape))
        _check("tl.atomic_cas", ptr.data, None, cmp.data.dtype.itemsize, write=True)  # no mask: every lane is active
        val = _handle_like(val, _full(val.data, shape))
        return atomic_cas(self, ptr, cmp, val, sem, scope_)

    scope.set_attr(InterpreterBuilder, "create_masked_load", create_masked_load)
    scope.set_attr(InterpreterBuilder, "create_masked_store", create_masked_store)
    scope.set_attr(InterpreterBuilder, "create_atomic_rmw", create_atomic_rmw)
    scope.set_attr(InterpreterBuilder, "create_atomic_cas", create_atomic_cas)
