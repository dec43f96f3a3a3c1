"""Every operator cudadev registers, and its boxed fallback, take tensors of
another device exactly where torch.cuda does, and refuse them where torch.cuda
does: each call is made with one argument on the CPU (or on the second GPU,
or replaced by a 0-dim CPU tensor), once on cudadev and once on torch.cuda,
and the two must both raise or both give the same result. cudadev's own
checks name the argument with its device. A plugin that quietly computes on
mixed devices would hide device-placement bugs in every test that runs on it.

The registered operators are read from the dispatcher: a newly registered one
fails test_every_registered_operator_is_covered until it has a sample here
(or, if it cannot be mixed, an entry in NOT_CHECKED saying why)."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch

pytestmark = pytest.mark.gpu

TWO_GPUS = torch.cuda.device_count() > 1

# cudadev's sources (csrc/*.cpp): what is registered there is cudadev's. (torch registers some operators
# for every PrivateUse1 backend itself: c10d's collectives, FSDP's copies.)
SOURCES = {path.name for path in (Path(__file__).resolve().parents[2] / "csrc").glob("*.cpp")}

# cudadev's operators with two or more tensor arguments that have no sample, and why.
NOT_CHECKED = {
    "aten::_has_compatible_shallow_copy_type": "reads metadata only, and is asked across devices by "
    "design: Module.to() asks whether a parameter can take the moved tensor in place (tensor_ops.cpp)",
    "aten::_copy_from": "a copy between devices: taking tensors of two devices is what it is for (copy.cpp)",
    "aten::_copy_from_and_resize": "a copy between devices, like _copy_from",
    "aten::_fused_sdp_choice": "reads metadata only; scaled_dot_product_attention refuses mixed devices before "
    "asking it (validate_sdpa_input), and the attention ops it picks check their arguments (attention.cpp)",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": "its philox seed and offset are CPU "
    "tensors where memory-efficient attention made them so (outside graph capture), as on torch.cuda; its other "
    "tensors are checked (attention.cpp), as the forward's sample shows",
}


@dataclass(frozen=True)
class Sample:
    """A same-device call of `op`: `make(t)` gives its args and kwargs, with t(*shape) making a tensor on the
    device under test."""

    op: str
    make: Callable
    # Compare with torch.cuda (False: torch.cuda has no kernel for the op; the mixed call must be refused).
    mirror: bool = True
    # The operator torch reaches cudadev's fallback through (a composite calls another overload).
    reaches: str = ""
    # Where cudadev refuses what torch.cuda takes ("argument@variant"), and why (a comment at the sample).
    stricter: tuple = ()

    @property
    def overload(self):
        namespace, _, name = self.op.partition("::")
        base, _, overload = name.partition(".")
        return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")

    def __str__(self):
        return self.op


def conv_args(t):
    return [t(1, 2, 5, 5), t(3, 2, 3, 3), t(3)]


def conv_params():
    return [[1, 1], [0, 0], [1, 1], False, [0, 0], 1]


REGISTERED_SAMPLES = [
    Sample("aten::mm", lambda t: ([t(2, 3), t(3, 4)], {})),
    Sample("aten::mm.out", lambda t: ([t(2, 3), t(3, 4)], {"out": t(2, 4)})),
    Sample("aten::addmm", lambda t: ([t(4), t(2, 3), t(3, 4)], {})),
    Sample("aten::addmm.out", lambda t: ([t(4), t(2, 3), t(3, 4)], {"out": t(2, 4)})),
    Sample("aten::addmm_", lambda t: ([t(2, 4), t(2, 3), t(3, 4)], {})),
    Sample("aten::bmm", lambda t: ([t(2, 2, 3), t(2, 3, 4)], {})),
    Sample("aten::bmm.out", lambda t: ([t(2, 2, 3), t(2, 3, 4)], {"out": t(2, 2, 4)})),
    Sample("aten::baddbmm", lambda t: ([t(2, 2, 4), t(2, 2, 3), t(2, 3, 4)], {})),
    Sample("aten::baddbmm.out", lambda t: ([t(2, 2, 4), t(2, 2, 3), t(2, 3, 4)], {"out": t(2, 2, 4)})),
    Sample("aten::baddbmm_", lambda t: ([t(2, 2, 4), t(2, 2, 3), t(2, 3, 4)], {})),
    Sample("aten::set_.source_Tensor", lambda t: ([t(0), t(2, 3)], {})),
    Sample("aten::set_.source_Storage", lambda t: ([t(0), t(6).untyped_storage()], {})),
    Sample(
        "aten::set_.source_Storage_storage_offset",
        lambda t: ([t(0), t(6).untyped_storage(), 0, [2, 3], [3, 1]], {}),
    ),
    Sample("aten::convolution_overrideable", lambda t: ([*conv_args(t), *conv_params()], {}), mirror=False),
    Sample(
        "aten::convolution_backward_overrideable",
        lambda t: ([t(1, 3, 3, 3), *conv_args(t)[:2], *conv_params(), [True] * 3], {}),
        mirror=False,
    ),
    Sample("aten::_scaled_dot_product_fused_attention_overrideable",
           lambda t: ([t(1, 2, 8, 16), t(1, 2, 8, 16), t(1, 2, 8, 16), t(8, 8)], {}), mirror=False),
]

# Operators cudadev does not register: their CUDA kernels run through the
# boxed fallback (fallback.cpp).
FALLBACK_SAMPLES = [
    Sample("aten::add.Tensor", lambda t: ([t(2, 3), t(2, 3)], {}), reaches="aten::add.out"),
    Sample("aten::mul.out", lambda t: ([t(2, 3), t(2, 3)], {"out": t(2, 3)})),
    Sample("aten::neg.out", lambda t: ([t(2, 3)], {"out": t(2, 3)})),
    Sample("aten::sum.IntList_out", lambda t: ([t(2, 3), [0]], {"out": t(3)})),
    Sample("aten::addcmul.out", lambda t: ([t(2, 3), t(2, 3), t(2, 3)], {"out": t(2, 3)})),
    Sample("aten::index_select", lambda t: ([t(4, 3), 0, t(2).long() % 4], {})),
    Sample("aten::cat", lambda t: ([[t(2, 3), t(1, 3), t(2, 3)]], {}), reaches="aten::cat.out"),
    Sample("aten::where.self", lambda t: ([t(2, 3) > 3, t(2, 3), t(2, 3)], {})),
    # torch.cuda reads a value of another GPU with item(); the fallback runs one device's CUDA kernel on
    # aliases of that device's tensors, so it refuses a tensor of another cudadev device outright.
    Sample("aten::fill_.Tensor", lambda t: ([t(2, 3), t()], {}), stricter=("self@second GPU", "value@second GPU")),
    Sample("aten::index.Tensor_out", lambda t: ([t(4, 3), [t(2).long() % 4]], {"out": t(2, 3)})),
    Sample("aten::index_put_", lambda t: ([t(4, 3), [t(2).long() % 4], t(2, 3)], {}), reaches="aten::_index_put_impl_"),
]

# Multi-tensor operators, registered by name to the fallback's CUDA path (foreach.cpp): one list element (or
# the scalar tensor) at a time on another device.
MULTI_TENSOR_SAMPLES = [
    Sample("aten::_foreach_add_.List", lambda t: ([[t(2, 3), t(4)], [t(2, 3), t(4)]], {})),
    Sample("aten::_foreach_addcdiv_.ScalarList",
           lambda t: ([[t(2, 3), t(4)], [t(2, 3), t(4)], [t(2, 3), t(4)], [0.5, 0.25]], {})),
    Sample("aten::_foreach_mul_.Tensor", lambda t: ([[t(2, 3), t(4)], t()], {})),
    Sample("aten::_foreach_sqrt", lambda t: ([[t(2, 3), t(4)]], {})),
]


# ---------------------------------------------------------------- the coverage


def registered_from(name: str) -> str | None:
    """The cudadev source file that registered `name`'s PrivateUse1 kernel, or None: the dispatcher keeps where
    it was registered."""
    for line in torch._C._dispatch_dump(name).splitlines():
        site = re.match(r"PrivateUse1: registered at (.+):\d+ ", line)
        if site:
            path = Path(site.group(1))
            return path.name if path.parent.name == "csrc" and path.name in SOURCES else None
    return None


def registered_in_cudadev(name: str) -> bool:
    return registered_from(name) is not None


# foreach.cpp registers the multi-tensor operators to the boxed fallback's own CUDA path (run_cuda_kernel) by
# name, so their device checks are the fallback's own, sampled in MULTI_TENSOR_SAMPLES.
FALLBACK_BY_NAME = "foreach.cpp"


def registered_operators():
    """The operators cudadev registers for PrivateUse1 (aten::name.overload)."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    return sorted(name for name in names if registered_in_cudadev(name))


def tensor_like(type_) -> int:
    """How many tensors (or storages) an argument of this type can hold: 0, 1 or 2 (a list)."""
    text = str(type_)
    if text in ("Tensor", "Optional[Tensor]", "Storage"):
        return 1
    if text in ("List[Tensor]", "List[Optional[Tensor]]"):
        return 2
    return 0


def mixable(op: str) -> bool:
    return sum(tensor_like(a.type) for a in Sample(op, None).overload._schema.arguments) >= 2


def reaches_the_fallback(op: str) -> bool:
    table = torch._C._dispatch_dump_table(op)
    return any(line.startswith("PrivateUse1:") and "[backend fallback]" in line for line in table.splitlines())


def test_every_registered_operator_is_covered():
    names = registered_operators()
    assert "aten::mm" in names and "aten::sin" not in names, names  # the enumeration sees cudadev's
    sampled = {sample.op for sample in REGISTERED_SAMPLES}
    uncovered = [name for name in names if mixable(name) and name not in sampled and name not in NOT_CHECKED
                 and registered_from(name) != FALLBACK_BY_NAME]
    assert not uncovered, (
        f"cudadev registers {uncovered}, which take tensors that could be on two devices, but "
        "test_cudadev_mixed_devices.py has no sample for them: add one to REGISTERED_SAMPLES (or, with the "
        "reason, to NOT_CHECKED)"
    )
    stale = sorted((sampled | set(NOT_CHECKED)) - set(names))
    assert not stale, f"samples for operators cudadev does not register: {stale}; move them to FALLBACK_SAMPLES"
    not_fallback = [s.op for s in FALLBACK_SAMPLES if not reaches_the_fallback(s.reaches or s.op)]
    assert not not_fallback, f"{not_fallback} do not reach cudadev's fallback: update FALLBACK_SAMPLES"


# ---------------------------------------------------------------- one argument elsewhere


def maker(device):
    def t(*shape):
        n = 1
        for size in shape:
            n *= size
        return (torch.arange(n, dtype=torch.float32) % 7 + 1).reshape(shape).to(device)

    return t


@dataclass(frozen=True)
class Slot:
    name: str  # as an error names it: `out`, `tensors[1]`
    position: object  # an int into args, or a kwargs key
    element: object = None  # the index into a list argument


def slots_of(sample, args, kwargs):
    slots = []
    for i, argument in enumerate(sample.overload._schema.arguments):
        position = i if i < len(args) else argument.name
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if isinstance(value, (torch.Tensor, torch.UntypedStorage)):
            slots.append(Slot(argument.name, position))
        elif isinstance(value, (list, tuple)):
            for j, element in enumerate(value):
                if isinstance(element, torch.Tensor):
                    slots.append(Slot(f"{argument.name}[{j}]", position, j))
    return slots


def replaced(value, how):
    """The argument moved to a device, or (how == "scalar") a 0-dim CPU tensor of its dtype."""
    if how == "scalar":
        if isinstance(value, torch.UntypedStorage):
            return None
        return torch.tensor(2, dtype=value.dtype)
    if isinstance(value, torch.UntypedStorage):
        return torch.empty(value.nbytes(), dtype=torch.uint8, device=how).untyped_storage()
    return value.to(how)


def with_replaced(args, kwargs, slot, how):
    args, kwargs = list(args), dict(kwargs)
    where = args if isinstance(slot.position, int) else kwargs
    value = where[slot.position]
    if slot.element is None:
        new = replaced(value, how)
        if new is None:
            return None
        where[slot.position] = new
    else:
        where[slot.position] = list(value)
        where[slot.position][slot.element] = replaced(value[slot.element], how)
    return args, kwargs


def routed_to(device_type, args, kwargs) -> bool:
    values = [*args, *kwargs.values()]
    values += [v for value in values if isinstance(value, (list, tuple)) for v in value]
    return any(isinstance(v, torch.Tensor) and v.device.type == device_type for v in values)


def outcome(call):
    """("raised", message) or ("returned", the result on the CPU, the devices of its tensors)."""
    try:
        result = call()
    except (RuntimeError, NotImplementedError, IndexError, ValueError) as error:
        return "raised", str(error)
    results = result if isinstance(result, (list, tuple)) else [result]
    tensors = [r for r in results if isinstance(r, torch.Tensor)]
    return "returned", [t.cpu() for t in tensors], [t.device for t in tensors]


def as_cuda_device(device):
    return torch.device("cuda", device.index) if device.type == "cudadev" else device


def variants():
    """(label, replacement on cudadev, replacement on torch.cuda)."""
    kinds = [("cpu", "cpu", "cpu"), ("cpu scalar", "scalar", "scalar")]
    if TWO_GPUS:
        kinds.append(("second GPU", "cudadev:1", "cuda:1"))
    return kinds


def check_like_cuda(sample, own_check):
    t_dev, t_cuda = maker("cudadev:0"), maker("cuda:0")
    args, kwargs = sample.make(t_dev)
    sample.overload(*args, **kwargs)  # the same-device call works
    for slot in slots_of(sample, args, kwargs):
        for label, on_cudadev, on_cuda in variants():
            mixed = with_replaced(*sample.make(t_dev), slot, on_cudadev)
            if mixed is None or not routed_to("cudadev", *mixed):
                continue  # not a cudadev call any more
            where = f"{sample.op} with {slot.name} as {label}"
            got = outcome(lambda: sample.overload(*mixed[0], **mixed[1]))
            if f"{slot.name}@{label}" in sample.stricter:
                expected = ("raised", "")
            elif sample.mirror:
                reference = with_replaced(*sample.make(t_cuda), slot, on_cuda)
                expected = outcome(lambda: sample.overload(*reference[0], **reference[1]))
            else:  # torch.cuda refuses a mixed convolution (a 0-dim CPU tensor too)
                expected = ("raised", "")
            assert got[0] == expected[0], f"{where}: cudadev {got}, torch.cuda {expected}"
            if got[0] == "returned":
                assert [as_cuda_device(d) for d in got[2]] == expected[2], f"{where}: {got[2]} vs {expected[2]}"
                for ours, theirs in zip(got[1], expected[1]):
                    torch.testing.assert_close(ours, theirs, msg=where)
            elif own_check and label != "cpu scalar":  # cudadev's checks name the argument with its device
                named, device = re.escape(slot.name), on_cudadev
                assert re.search(rf"(^|\W){named} (is )?on {device}\b", got[1]) or re.search(
                    rf"on cudadev:0 and {named} on {device}\b", got[1]
                ), f"{where}: {got[1]}"
            elif label == "second GPU":  # the fallback's check, or torch's own (TensorIterator's)
                assert "cudadev:1" in got[1], f"{where}: {got[1]}"
            # A CPU tensor in the fallback is refused by the CUDA kernel itself, in its own words.


@pytest.mark.parametrize("sample", REGISTERED_SAMPLES, ids=str)
def test_a_registered_operator_takes_other_devices_tensors_where_torch_cuda_does(sample):
    check_like_cuda(sample, own_check=True)


@pytest.mark.parametrize("sample", FALLBACK_SAMPLES, ids=str)
def test_the_fallback_takes_other_devices_tensors_where_torch_cuda_does(sample):
    check_like_cuda(sample, own_check=False)


@pytest.mark.parametrize("sample", MULTI_TENSOR_SAMPLES, ids=str)
def test_a_multi_tensor_operator_takes_other_devices_tensors_where_torch_cuda_does(sample):
    assert registered_from(sample.op) == FALLBACK_BY_NAME, sample.op
    check_like_cuda(sample, own_check=False)


@pytest.mark.skipif(not TWO_GPUS, reason="needs two GPUs (cudadev:0 and cudadev:1)")
def test_the_fallback_names_the_argument_of_another_cudadev_device():
    x, y = torch.ones(4, 3, device="cudadev:0"), torch.ones(4, 3, device="cudadev:1")
    with pytest.raises(RuntimeError, match=r"index_select got tensors on cudadev:0 and cudadev:1: index is on "
                                           r"cudadev:1 and self on cudadev:0.*index\.to\('cudadev:0'\)"):
        torch.index_select(x, 0, torch.zeros(2, dtype=torch.long, device="cudadev:1"))
    with pytest.raises(RuntimeError, match=r"tensors\[1\] is on cudadev:1 and tensors\[0\] on cudadev:0"):
        torch.cat([x, y])
