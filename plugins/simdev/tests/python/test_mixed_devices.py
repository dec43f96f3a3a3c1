"""Every operator simdev registers, and its CPU fallback, refuse tensors of
another device (the CPU, another simdev device) as CUDA does, naming the
operator, the argument, the devices and the fix; CUDA's exceptions (a 0-dim
CPU operand of a binary op, advanced-indexing indices, fill_'s value) still
work. A plugin that quietly computes on mixed devices would hide
device-placement bugs in every test that runs on it.

The registered operators are read from the dispatcher: a newly registered one
fails test_every_registered_operator_is_covered until it has a sample here
(or, if it cannot be mixed, an entry in NOT_CHECKED saying why)."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

torch_simdev = pytest.importorskip(
    "torch_simdev", reason="torch_simdev is not installed; build it with: pip install --no-build-isolation plugins/simdev"
)

SIMDEV0 = torch.device("simdev:0")
SIMDEV1 = torch.device("simdev:1")

# simdev's operator sources (csrc/ops/*.cpp): what is registered there is simdev's. (torch registers
# some operators for every PrivateUse1 backend itself: c10d's collectives, FSDP's copies.)
OP_SOURCES = {path.name for path in (Path(__file__).resolve().parents[2] / "csrc" / "ops").glob("*.cpp")}

# simdev's operators with two or more tensor arguments that have no sample, and why.
NOT_CHECKED = {
    "aten::_has_compatible_shallow_copy_type": "reads metadata only, and is asked across devices by "
    "design: Module.to() asks whether a parameter can take the moved tensor in place (Factory.cpp)",
    "aten::_copy_from": "a copy between devices: taking tensors of two devices is what it is for (Copy.cpp)",
    "aten::_copy_from_and_resize": "a copy between devices, like _copy_from",
    "aten::_fused_sdp_choice": "reads metadata only; scaled_dot_product_attention refuses mixed devices before "
    "asking it (validate_sdpa_input), and the attention ops it picks check their arguments (Attention.cpp)",
}


def s0(*shape, dtype=torch.float32):
    """A simdev:0 tensor of small distinct values."""
    n = 1
    for size in shape:
        n *= size
    return (torch.arange(n, dtype=torch.float32) % 7 + 1).to(dtype).reshape(shape).to(SIMDEV0)


@dataclass(frozen=True)
class Sample:
    """A same-device call of `op` (args and kwargs made fresh on simdev:0 by `make`)."""

    op: str
    make: Callable[[], tuple]
    # Arguments that CUDA takes from another device too (the call then works):
    # "name" from any device, "name@cpu" from the CPU only.
    accepted: tuple = ()
    # The operator the error names when it is not `op` (a composite calling another).
    reported_as: str = ""

    @property
    def overload(self):
        namespace, _, name = self.op.partition("::")
        base, _, overload = name.partition(".")
        return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")

    def __str__(self):
        return self.op


def conv_args():
    return [s0(1, 2, 5, 5), s0(3, 2, 3, 3), s0(3)]


def attention_args():
    return [s0(1, 2, 4, 8), s0(1, 2, 4, 8), s0(1, 2, 4, 8)]


REGISTERED_SAMPLES = [
    *(
        Sample(f"aten::{op}.Tensor", lambda: ([s0(2, 3), s0(2, 3)], {}))
        for op in ("add", "sub", "mul", "div")
    ),
    *(
        Sample(f"aten::{op}.out", lambda: ([s0(2, 3), s0(2, 3)], {"out": s0(2, 3)}))
        for op in ("add", "sub", "mul", "div")
    ),
    *(Sample(f"aten::{op}_.Tensor", lambda: ([s0(2, 3), s0(2, 3)], {})) for op in ("add", "sub", "mul", "div")),
    # the matrix products (ops/Matmul.cpp)
    Sample("aten::mm", lambda: ([s0(2, 3), s0(3, 4)], {})),
    Sample("aten::mm.out", lambda: ([s0(2, 3), s0(3, 4)], {"out": s0(2, 4)})),
    Sample("aten::bmm", lambda: ([s0(2, 2, 3), s0(2, 3, 4)], {})),
    Sample("aten::bmm.out", lambda: ([s0(2, 2, 3), s0(2, 3, 4)], {"out": s0(2, 2, 4)})),
    Sample("aten::addmm", lambda: ([s0(4), s0(2, 3), s0(3, 4)], {})),  # F.linear
    Sample("aten::addmm.out", lambda: ([s0(4), s0(2, 3), s0(3, 4)], {"out": s0(2, 4)})),
    Sample("aten::addmm_", lambda: ([s0(2, 4), s0(2, 3), s0(3, 4)], {})),
    Sample("aten::baddbmm", lambda: ([s0(2, 2, 4), s0(2, 2, 3), s0(2, 3, 4)], {})),
    Sample("aten::baddbmm.out", lambda: ([s0(2, 2, 4), s0(2, 2, 3), s0(2, 3, 4)], {"out": s0(2, 2, 4)})),
    Sample("aten::baddbmm_", lambda: ([s0(2, 2, 4), s0(2, 2, 3), s0(2, 3, 4)], {})),
    # the losses the fallback runs as functional operators (ops/Fallback.cpp)
    Sample("aten::mse_loss", lambda: ([s0(2, 3), s0(2, 3)], {})),
    Sample("aten::smooth_l1_loss", lambda: ([s0(2, 3), s0(2, 3)], {})),
    Sample("aten::neg.out", lambda: ([s0(2, 3)], {"out": s0(2, 3)})),
    Sample("aten::exp.out", lambda: ([s0(2, 3)], {"out": s0(2, 3)})),
    Sample("aten::sum.IntList_out", lambda: ([s0(2, 3), [0]], {"out": s0(3)})),
    Sample("aten::mean.out", lambda: ([s0(2, 3), [0]], {"out": s0(3)})),
    # ATen's fill_ reads a value of another device with item() (Fill.cpp), on CUDA too.
    Sample("aten::fill_.Tensor", lambda: ([s0(2, 3), s0()], {}), accepted=("self", "value")),
    Sample("aten::set_.source_Tensor", lambda: ([s0(0), s0(2, 3)], {})),
    Sample("aten::set_.source_Storage", lambda: ([s0(0), s0(6).untyped_storage()], {})),
    Sample(
        "aten::set_.source_Storage_storage_offset", lambda: ([s0(0), s0(6).untyped_storage(), 0, [2, 3], [3, 1]], {})
    ),
    # The convolutions name themselves as the user calls them (Convolution.cpp).
    Sample(
        "aten::convolution_overrideable",
        lambda: ([*conv_args(), [1, 1], [0, 0], [1, 1], False, [0, 0], 1], {}),
        reported_as="convolution",
    ),
    Sample(
        "aten::_convolution",
        lambda: ([*conv_args(), [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, False, False], {}),
        reported_as="convolution",
    ),
    Sample(
        "aten::convolution_backward_overrideable",
        lambda: ([s0(1, 3, 3, 3), *conv_args()[:2], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True] * 3], {}),
        reported_as="convolution_backward",
    ),
    Sample(
        "aten::convolution_backward",
        lambda: ([s0(1, 3, 3, 3), *conv_args()[:2], [3], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True] * 3], {}),
        reported_as="convolution_backward",
    ),
    # fused attention (Attention.cpp)
    Sample(
        "aten::_scaled_dot_product_fused_attention_overrideable",
        lambda: ([*attention_args(), s0(4, 4)], {}),
        reported_as="_scaled_dot_product_fused_attention_overrideable",
    ),
    Sample(
        "aten::_scaled_dot_product_fused_attention_overrideable_backward",
        lambda: ([s0(1, 2, 4, 8), *attention_args(), s0(4, 4), [True, True, True, False], s0(1, 2, 4, 8),
                  s0(1, 2, 4), s0(0), s0(0), 4, 4, 0.0, False, s0(), s0()], {}),
        reported_as="_scaled_dot_product_fused_attention_overrideable_backward",
    ),
]

# Operators simdev does not register, as the call reaches the CPU fallback
# (Fallback.cpp), whose device check serves them all: their own names, or
# (reported_as) the out= or implementation overload that torch's composite
# kernel for a plugin device calls.
FALLBACK_SAMPLES = [
    Sample("aten::addcmul.out", lambda: ([s0(2, 3), s0(2, 3), s0(2, 3)], {"out": s0(2, 3)})),
    Sample("aten::index_select", lambda: ([s0(4, 3), 0, s0(2, dtype=torch.int64)], {})),
    Sample("aten::cat", lambda: ([[s0(2, 3), s0(1, 3), s0(2, 3)]], {}), reported_as="aten::cat.out"),
    Sample("aten::where.self", lambda: ([s0(2, 3) > 3, s0(2, 3), s0(2, 3)], {})),
    # ATen moves CPU indices to the indexed tensor's device, on CUDA too.
    Sample(
        "aten::index.Tensor_out",
        lambda: ([s0(4, 3), [s0(2, dtype=torch.int64)]], {"out": s0(2, 3)}),
        accepted=("indices@cpu",),
    ),
    Sample(
        "aten::index_put_",
        lambda: ([s0(4, 3), [s0(2, dtype=torch.int64)], s0(2, 3)], {}),
        accepted=("indices@cpu",),
        reported_as="aten::_index_put_impl_",
    ),
]


# ---------------------------------------------------------------- the coverage


def registered_in_simdev(name: str) -> bool:
    """Whether simdev registered `name`'s PrivateUse1 kernel: the dispatcher keeps where it was registered."""
    for line in torch._C._dispatch_dump(name).splitlines():
        site = re.match(r"PrivateUse1: registered at (.+):\d+ ", line)
        if site:
            path = Path(site.group(1))
            return path.parent.name == "ops" and path.name in OP_SOURCES
    return False


def registered_operators():
    """The operators simdev registers for PrivateUse1 (aten::name.overload)."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return sorted(name for name in names if registered_in_simdev(name))


def tensor_like(type_) -> int:
    """How many tensors (or storages) an argument of this type can hold: 0, 1 or 2 (a list)."""
    text = str(type_)
    if text in ("Tensor", "Optional[Tensor]", "Storage"):
        return 1
    if text in ("List[Tensor]", "List[Optional[Tensor]]"):
        return 2
    return 0


def mixable(op: str) -> bool:
    """Whether a call of `op` can have tensors on two devices at all."""
    return sum(tensor_like(a.type) for a in Sample(op, lambda: None).overload._schema.arguments) >= 2


def test_every_registered_operator_is_covered():
    names = registered_operators()
    assert "aten::add.Tensor" in names and "aten::cat" not in names, names  # the enumeration sees simdev's
    sampled = {sample.op for sample in REGISTERED_SAMPLES}
    uncovered = [name for name in names if mixable(name) and name not in sampled and name not in NOT_CHECKED]
    assert not uncovered, (
        f"simdev registers {uncovered}, which take tensors that could be on two devices, but "
        "test_mixed_devices.py has no sample for them: add one to REGISTERED_SAMPLES (or, with the reason, "
        "to NOT_CHECKED)"
    )
    stale = sorted((sampled | set(NOT_CHECKED)) - set(names))
    assert not stale, f"samples for operators simdev does not register: {stale}; move them to FALLBACK_SAMPLES"
    through_fallback = [s.op for s in FALLBACK_SAMPLES if s.op in names]
    assert not through_fallback, f"{through_fallback} are registered now: move them to REGISTERED_SAMPLES"


# ---------------------------------------------------------------- one argument elsewhere


@dataclass(frozen=True)
class Slot:
    """Where a tensor (or storage) argument sits in a call: args[position] or kwargs[key], maybe [element]."""

    name: str  # as the error names it: `out`, `tensors[1]`
    argument: str  # the schema's argument name
    position: object  # an int into args, or a kwargs key
    element: object = None  # the index into a list argument


def slots_of(sample: Sample, args, kwargs):
    slots = []
    for i, argument in enumerate(sample.overload._schema.arguments):
        position = i if i < len(args) else argument.name
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if isinstance(value, (torch.Tensor, torch.UntypedStorage)):
            slots.append(Slot(argument.name, argument.name, position))
        elif isinstance(value, (list, tuple)):
            for j, element in enumerate(value):
                if isinstance(element, torch.Tensor):
                    slots.append(Slot(f"{argument.name}[{j}]", argument.name, position, j))
    return slots


def moved(value, device):
    if isinstance(value, torch.UntypedStorage):
        return torch.empty(value.nbytes(), dtype=torch.uint8, device=device).untyped_storage()
    return value.to(device)


def with_moved(args, kwargs, slot: Slot, device):
    args, kwargs = list(args), dict(kwargs)
    where = args if isinstance(slot.position, int) else kwargs
    if slot.element is None:
        where[slot.position] = moved(where[slot.position], device)
    else:
        where[slot.position] = list(where[slot.position])
        where[slot.position][slot.element] = moved(where[slot.position][slot.element], device)
    return args, kwargs


def on_simdev(args, kwargs) -> bool:
    """Whether the dispatcher routes the call to simdev: a simdev tensor among its arguments."""
    values = [*args, *kwargs.values()]
    values += [v for value in values if isinstance(value, (list, tuple)) for v in value]
    return any(isinstance(v, torch.Tensor) and v.device.type == "simdev" for v in values)


def as_cpu(result):
    if isinstance(result, torch.Tensor):
        return result.cpu()
    if isinstance(result, (list, tuple)):
        return [as_cpu(r) for r in result]
    return result


def other_devices():
    return [torch.device("cpu")] + ([SIMDEV1] if torch.simdev.device_count() > 1 else [])


def check_one_argument_elsewhere(sample: Sample):
    args, kwargs = sample.make()
    expected = as_cpu(sample.overload(*args, **kwargs))  # the same-device call works
    torch.simdev.synchronize()
    reported = (sample.reported_as or sample.op).partition(".")[0]  # aten::mm also names aten::mm.out
    for slot in slots_of(sample, args, kwargs):
        for device in other_devices():
            mixed_args, mixed_kwargs = with_moved(*sample.make(), slot, device)
            if not on_simdev(mixed_args, mixed_kwargs):
                continue  # the call would not reach simdev (set_ of a CPU tensor to a simdev storage)
            where = f"{sample.op} with {slot.name} on {device}"
            if slot.argument in sample.accepted or f"{slot.argument}@{device}" in sample.accepted:
                torch.testing.assert_close(as_cpu(sample.overload(*mixed_args, **mixed_kwargs)), expected, msg=where)
                continue
            with pytest.raises(RuntimeError) as raised:
                sample.overload(*mixed_args, **mixed_kwargs)
            message = str(raised.value)
            named = re.escape(slot.name)
            # The moved argument is named with its device, unless it is now the
            # first simdev tensor: then the others are named as off its device.
            assert re.search(rf"(^|\W){named} is on {device}\b", message) or re.search(
                rf"is on simdev:0 and {named} on {device}\b", message
            ), f"{where}: {message}"
            assert reported in message and re.search(r"\.to\('simdev:\d'\)", message), f"{where}: {message}"


@pytest.mark.parametrize("sample", REGISTERED_SAMPLES, ids=str)
def test_a_registered_operator_refuses_an_argument_on_another_device(sample):
    check_one_argument_elsewhere(sample)


def reaches_the_fallback(op: str) -> bool:
    table = torch._C._dispatch_dump_table(op)
    return any(line.startswith("PrivateUse1:") and "[backend fallback]" in line for line in table.splitlines())


@pytest.mark.parametrize("sample", FALLBACK_SAMPLES, ids=str)
def test_the_fallback_refuses_an_argument_on_another_device(sample):
    assert reaches_the_fallback(sample.reported_as or sample.op), "the sample does not test the fallback"
    check_one_argument_elsewhere(sample)


def test_foreach_lists_are_checked_tensor_by_tensor_as_on_cuda(two_devices):
    """torch runs a plugin device's foreach ops tensor by tensor (CompositeExplicitAutograd), as CUDA's
    slow path does: each position of the lists is checked on its own."""
    x, y = s0(2), s0(3).to(two_devices[1])
    with pytest.raises(RuntimeError, match=r"other is on cpu and self on simdev:0"):
        torch._foreach_add([x, y], [x.cpu(), y])
    sums = torch._foreach_add([x, y], [x, y])  # lists across devices, each position on one
    assert [t.device for t in sums] == [SIMDEV0, two_devices[1]]


# ---------------------------------------------------------------- the calls of issue #19


def test_linear_and_mm_with_another_devices_tensor_are_refused(two_devices):
    x, w = s0(2, 3), s0(4, 3)
    with pytest.raises(RuntimeError, match=r"mat2 is on cpu and self on simdev:0; move mat2 there with "
                                           r"\.to\('simdev:0'\) \(a module's parameters with module\.to"):
        F.linear(x, w.cpu())
    with pytest.raises(RuntimeError, match=r"aten::mm.*mat2 is on cpu and self on simdev:0"):
        torch.mm(x, w.t().cpu())
    with pytest.raises(RuntimeError, match=r"aten::mm.*mat2 is on simdev:1 and self on simdev:0"):
        torch.mm(x, w.t().to(two_devices[1]))
    with pytest.raises(RuntimeError, match=r"mat1 is on cpu and self on simdev:0"):
        torch.nn.Linear(3, 4).to(SIMDEV0)(x.cpu())  # addmm(bias, input, weight.t())
    torch.testing.assert_close(F.linear(x, w).cpu(), F.linear(x.cpu(), w.cpu()))


# ---------------------------------------------------------------- CPU scalars, as on CUDA


def cpu_scalar(value=2.0):
    return torch.tensor(value)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x + cpu_scalar(),
        lambda x: cpu_scalar() - x,
        lambda x: torch.mul(x, cpu_scalar(), out=torch.empty_like(x)),
        lambda x: x.clone().div_(cpu_scalar()),
        lambda x: torch.where(x > 3, x, cpu_scalar()),  # through the fallback
        lambda x: torch.where(torch.tensor(True), cpu_scalar(), x),  # the result on simdev all the same
        lambda x: torch.maximum(cpu_scalar(), x),
        lambda x: x.clone().fill_(cpu_scalar()),
    ],
    ids=["add", "rsub", "mul.out", "div_", "where", "where_cpu_first", "maximum", "fill_"],
)
def test_a_cpu_scalar_operand_is_accepted_where_cuda_accepts_it(call):
    x = s0(2, 3)
    result = call(x)
    assert result.device == SIMDEV0
    torch.testing.assert_close(result.cpu(), call(x.cpu()))


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda x: torch.add(x, x, out=cpu_scalar()), "out"),  # an output is never a CPU scalar
        (lambda x: cpu_scalar().add_(x.sum()), "self"),
        (lambda x: torch.neg(cpu_scalar(), out=x.sum()), "self"),  # unary ops take none
        (lambda x: torch.exp(cpu_scalar(), out=x.sum()), "self"),
        (lambda x: torch.sum(cpu_scalar(), [], out=x.sum()), "self"),  # nor do reductions
        (lambda x: torch.mean(cpu_scalar(), [], out=x.sum()), "self"),
        (lambda x: torch.ops.aten.addcmul.out(x.sum(), x.sum(), x.sum(), out=cpu_scalar()), "out"),  # the fallback
    ],
    ids=["add.out", "add_", "neg.out", "exp.out", "sum.out", "mean.out", "addcmul.out"],
)
def test_a_cpu_scalar_is_refused_where_cuda_refuses_it(call, argument):
    with pytest.raises(RuntimeError, match=rf"{argument} is on cpu and \w+ on simdev:0"):
        call(s0(2, 3))


def test_a_scalar_of_another_simdev_device_is_refused(two_devices):
    x = s0(2, 3)
    with pytest.raises(RuntimeError, match=r"other is on simdev:1 and self on simdev:0"):
        x + x.sum().to(two_devices[1])
    with pytest.raises(RuntimeError, match=r"other is on simdev:1 and condition on simdev:0"):
        torch.where(x > 3, x, x.sum().to(two_devices[1]))


def test_cpu_indices_are_used_as_on_cuda():
    x, index = s0(4, 3), torch.tensor([2, 0])
    got = x[index]
    assert got.device == SIMDEV0
    torch.testing.assert_close(got.cpu(), x.cpu()[index])
    y = x.clone()
    y[index] = torch.zeros(2, 3, device=SIMDEV0)
    expected = x.cpu().clone()
    expected[index] = 0
    torch.testing.assert_close(y.cpu(), expected)


def test_indices_of_another_simdev_device_are_refused(two_devices):
    x, index = s0(4, 3), torch.tensor([2, 0], device=two_devices[1])
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device"):  # ATen's
        x[index]
    with pytest.raises(RuntimeError, match=r"indices\[0\] is on simdev:1 and self on simdev:0"):
        x[index] = torch.zeros(2, 3, device=SIMDEV0)
