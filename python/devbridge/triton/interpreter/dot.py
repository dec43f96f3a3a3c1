"""tl.dot of bfloat16 operands for the interpreter Triton target.

Triton's interpreter keeps bfloat16 values as their bits in numpy uint16
arrays (it has no bfloat16 numpy type), and its InterpreterBuilder.create_dot
multiplies the arrays it is given with np.matmul: for bfloat16 operands it
multiplies the bit patterns as integers, so every bfloat16 tl.dot (Inductor's
matmul and flex-attention templates in bfloat16) returns garbage. During an
interpreted launch the operands are widened to float32 first (a bfloat16's
bits are the high half of its float32), exactly, as a GPU's bfloat16 dot
accumulates in float32; every other dtype goes to the interpreter unchanged.

The interpreter's names it uses are listed, with the Triton versions checked,
in _triton_api.
"""

from __future__ import annotations

from . import _triton_api
from .casts import bfloat16_to_float32


def _widened(handle):
    """A float32 TensorHandle of a bfloat16 one (the uint16 bits shifted into the high half)."""
    import triton.language as tl

    TensorHandle = _triton_api.interpreter().TensorHandle  # noqa: N806 (a class)
    return TensorHandle(bfloat16_to_float32(handle.data), tl.float32)


def patch(scope) -> None:
    """Install the bfloat16-aware create_dot for the launch (undone by scope.restore())."""
    import triton.language as tl

    InterpreterBuilder = _triton_api.interpreter().InterpreterBuilder  # noqa: N806 (a class)
    dot = InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.get_element_ty() == tl.bfloat16:
            a = _widened(a)
        if b.get_element_ty() == tl.bfloat16:
            b = _widened(b)
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    scope.set_attr(InterpreterBuilder, "create_dot", create_dot)
