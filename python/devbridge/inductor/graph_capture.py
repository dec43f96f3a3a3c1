"""torch.compile(mode="reduce-overhead") on a plugin device: the compiled
graphs Inductor would hand to CUDA graph trees on cuda are captured with
devbridge.graphs (the plugin's graph table) and replayed.

Per compiled graph (or graph partition) and per input signature (shapes,
strides, dtypes, integer values), as torch's CUDA graphs do:
  1st call   runs the compiled code as it is (the warm-up: autotuning, lazy
             kernel loads, library handles happen outside any capture);
  2nd call   copies the inputs into static buffers, captures one run of the
             compiled code on the device's side stream, replays it;
  later      copies the inputs into the static buffers (parameters and other
             static inputs are used in place), replays on the current stream,
             copies mutated inputs back.
A new signature (a new shape under dynamic=True, ...) gets a capture of its
own, and so do new static inputs: a capture reads its parameters where they
were, so one compiled graph serving two modules of one class (Dynamo reuses
it, the parameters being inputs), or a parameter replaced by another tensor,
is captured again for the new addresses, up to Inductor's
cudagraph_unexpected_rerecord_limit captures per signature, as CUDA graph
trees re-record. Where a graph cannot be captured, it runs as compiled, with one log
line that says why: nodes on other devices, inputs on other devices (a
graph partition handed CPU scalars it reads on the host, such as an
optimizer's step counts: a capture would keep the values it read), random
numbers (a replay would repeat the captured draws: plugin generators are not
registered with graphs), a plugin without a graph table, mutated inputs
Inductor does not let a capture own, a capture the plugin refuses.

One difference from CUDA graph trees: the outputs of a forward graph are
its static buffers, overwritten by its next replay (torch's own behaviour
with torch._inductor.config.triton.cudagraph_trees=False); clone an output
that must outlive the next call of the compiled function. A backward graph
hands out new tensors over its output memory at every replay and keeps no
reference to them, as graph trees do: autograd then takes a gradient as it is
into .grad instead of copying it (AccumulateGrad copies a gradient somebody
else still references), which would cost a train step a copy of every weight
gradient. Before it replays again, the tensors it handed out that are still
held (torch.autograd.grad's results) are moved to memory of their own; where
other tensors still use its output memory (a .grad that took a gradient as it
is and is kept across steps, to accumulate into), the call replays another
capture of the graph, made for it as CUDA graph trees record another graph
(within the same limit of captures).
"""

from __future__ import annotations

import logging
import threading
import weakref

import torch

from . import _torch_api

log = logging.getLogger("devbridge.inductor")

_counts_lock = threading.Lock()
_counts = {"captures": 0, "replays": 0, "not_captured": 0}


def graph_capture_counts() -> dict:
    """How many graphs were captured, replayed and left uncaptured in this
    process (reduce-overhead on the plugin device)."""
    with _counts_lock:
        return dict(_counts)


def _count(what: str) -> None:
    with _counts_lock:
        _counts[what] += 1


def _report(device: str, reason: str) -> None:
    _count("not_captured")
    log.warning("devbridge: torch.compile(mode='reduce-overhead') on %s runs this graph without graph capture: %s",
                device, reason)


def install(device: str) -> list[str]:
    """Route reduce-overhead graphs of `device` here; returns what was patched."""
    return _torch_api.accept_graph_capture(
        device, graphify=lambda model, static, mutated_input_idxs=(), is_backward=False: _Graphified(
            device, model, static, mutated_input_idxs, is_backward),
        refusal=lambda graph_lowering: _refusal(device, graph_lowering),
        report_skip=lambda reasons: _report(device, "; ".join(reasons)))


def _refusal(device: str, graph_lowering) -> str | None:
    """Why a graph on `device` alone cannot be captured (None: it can)."""
    from .. import graphs
    from ..triton.hardware import declared

    reason = None
    hardware = declared(device)
    if not graphs.is_available(device):
        reason = (f"the {device} plugin registered no graph table (include/devbridge/c_graph_api.h, "
                  "devbridge.graphs.register_graph_api)")
    elif hardware is not None and hardware.kernel_runtime == "host":
        # Its launches run each kernel on the launching thread: a capture
        # would fail at the first Triton kernel (src/python/host_kernel_runtime.cpp).
        reason = (f"{device}'s Triton kernels run on the host kernel runtime (kernel_runtime='host'), which runs "
                  "each kernel on the launching thread, where no graph can record it; to capture, declare a "
                  "kernel runtime that queues kernels on the plugin's streams (docs/plugin-authors.md §6)")
    else:
        seeded = [node for node in _torch_api.lowering_nodes(graph_lowering) if _draws_random_numbers(node)]
        if seeded:
            reason = (f"it draws random numbers ({seeded[0].target}); a replay would repeat the draws of the "
                      "capture")
    if reason is not None:
        _report(device, reason)
        return f"devbridge: {reason}"
    return None


def _draws_random_numbers(node) -> bool:
    target = getattr(node, "target", None)
    tags = getattr(target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return _dropout_p(node, target) != 0.0
    name = str(target)
    return any(word in name for word in ("inductor_seed", "inductor_random", "inductor_randint", "philox"))


def _dropout_p(node, target) -> float | None:
    """The dropout probability of a seeded op that has one, else None.

    The fused attention ops (aten._scaled_dot_product_fused_attention_overrideable,
    the flash, efficient and cuDNN ones, and their backwards) are tagged
    nondeterministic_seeded for their dropout alone: with dropout_p=0 they draw
    nothing, and a training step's attention can be captured."""
    schema = getattr(target, "_schema", None)
    names = [argument.name for argument in getattr(schema, "arguments", ())]
    if "dropout_p" not in names:
        return None
    index = names.index("dropout_p")
    args = getattr(node, "args", ())
    value = args[index] if index < len(args) else getattr(node, "kwargs", {}).get(
        "dropout_p", schema.arguments[index].default_value)
    return value if isinstance(value, (int, float)) else None


def _signature(inputs) -> tuple:
    # Computed at every call, so kept to what a capture depends on: a static
    # buffer is made from shape, strides, dtype and device (the storage offset
    # of an input does not reach it).
    return tuple((x.shape, x.stride(), x.dtype, x.device) if isinstance(x, torch.Tensor)
                 else (type(x), x if isinstance(x, (int, float, bool)) else None) for x in inputs)


def _expanded_dims(t: torch.Tensor) -> list[int]:
    return [d for d in range(t.dim()) if t.stride(d) == 0 and t.size(d) > 1]


def _copy_into(dst: torch.Tensor, src: torch.Tensor, dims: list[int]) -> None:
    """dst.copy_(src) for a dst that may be expanded (stride 0, which copy_
    refuses as overlapping): every element of an expanded dimension is the
    same memory, so index 0 of it is copied. dims: _expanded_dims(dst),
    found once per capture."""
    for d in dims:
        dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
    dst.copy_(src)


class _Capture:
    # copied: (input index, static buffer, its expanded dimensions) per input
    # that each replay copies in, decided once at the capture; written_back:
    # (input index, static buffer) of those the graph mutates. outputs: what a
    # forward graph returns at every replay. A backward graph keeps instead:
    # memory (tensors over its outputs' memory, never handed out), handed (weak
    # references to the tensors its last replay handed out) and in_use (per
    # output storage, its storage_handle and the references the capture's own
    # tensors hold, counted at its first replay: more mean the memory is still
    # in use). in_place: the indices of the tensors used in place;
    # static_addresses: per input, the data pointer of one used in place, else
    # None. The tensors used in place are not kept: the graph reads whatever is
    # at their addresses, where a replay finds the inputs of its call (_find),
    # and a replaced parameter is not held alive by the capture made for it.
    __slots__ = ("graph", "copied", "written_back", "outputs", "as_tuple", "memory", "handed", "in_use",
                 "in_place", "static_addresses")


class _Graphified:
    """The replacement of one compiled callable (boxed: it takes the list of
    inputs and may empty it)."""

    def __init__(self, device: str, model, static_input_idxs, mutated_input_idxs, is_backward=False):
        self.device = device
        self.is_backward = is_backward
        self.model = model
        self.static = frozenset(static_input_idxs)
        self.mutated = frozenset(mutated_input_idxs)
        self.lock = threading.Lock()
        self.warmed: set = set()
        self.captures: dict = {}  # signature -> its captures, one per set of static input addresses
        self.uncaptured: set = set()

    def __call__(self, inputs: list):
        key = _signature(inputs)
        capture = self._find(self.captures.get(key, ()), inputs)
        if capture is None:
            with self.lock:
                if key in self.uncaptured or key not in self.warmed:
                    self.warmed.add(key)
                    return self.model(inputs)
                captured = self.captures.setdefault(key, [])
                capture = self._find(captured, inputs)
                if capture is None:
                    limit = _torch_api.capture_rerecord_limit()
                    if len(captured) >= limit:
                        self.uncaptured.add(key)
                        _report(self.device, f"its parameters or other static inputs moved, or its earlier "
                                             f"outputs were still in use, {limit} times (each needs a capture of "
                                             "its own; the limit is Inductor's "
                                             "config.triton.cudagraph_unexpected_rerecord_limit)")
                        return self.model(inputs)
                    capture = self._capture(inputs)
                    if capture is None:
                        self.uncaptured.add(key)
                        return self.model(inputs)
                    captured.append(capture)
        return self._replay(capture, inputs)

    def _find(self, captures, inputs: list) -> _Capture | None:
        """The capture made for the static inputs' current addresses (for a
        backward graph, one whose output memory is free again)."""
        for capture in captures:
            if _torch_api.data_pointers_equal(inputs, capture.static_addresses, capture.in_place) and (
                    not self.is_backward or not _outputs_in_use(capture)):
                return capture
        return None

    def _capture(self, inputs: list) -> _Capture | None:
        from .. import graphs

        elsewhere = next((i for i, x in enumerate(inputs)
                          if isinstance(x, torch.Tensor) and x.device.type != self.device), None)
        if elsewhere is not None:
            # With graph partitions on, a partition's kernels may take a CPU
            # scalar tensor's value as a kernel argument (`arg.item()` in the
            # generated code): read once at the capture, baked into the graph,
            # never read again by a replay. Torch's graph trees do not meet it
            # for optimizers: Dynamo makes those capturable (step counts on the
            # device) for cuda parameters.
            x = inputs[elsewhere]
            if x.device.type == "cpu":
                why = ("which the compiled code reads on the host: a capture would keep the value read then. An "
                       "optimizer keeps its step counts on the CPU unless built with capturable=True "
                       "(torch.compile sets it for cuda and xpu parameters only); pass capturable=True to "
                       "capture its step")
            else:
                why = f"whose work a capture on {self.device} cannot record"
            _report(self.device, f"it takes a {x.dim()}-d {x.dtype} tensor on {x.device}, {why}")
            return None
        capture = _Capture()
        capture.in_place = [i for i in sorted(self.static) if isinstance(inputs[i], torch.Tensor)]
        in_place = set(capture.in_place)
        capture.static_addresses = [x.data_ptr() if i in in_place else None for i, x in enumerate(inputs)]
        static_inputs = []
        capture.copied, capture.written_back = [], []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and i not in self.static:
                buffer = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
                dims = _expanded_dims(buffer)
                _copy_into(buffer, x, dims)
                static_inputs.append(buffer)
                capture.copied.append((i, buffer, dims))
                if i in self.mutated:
                    capture.written_back.append((i, buffer))
            else:
                static_inputs.append(x)
        capture.graph = graphs.Graph()
        device = next(x.device for x in inputs if isinstance(x, torch.Tensor) and x.device.type == self.device)
        try:
            with torch.accelerator.device_index(device.index):
                with graphs.graph(capture.graph):
                    outputs = self.model(static_inputs)
        except Exception as error:  # noqa: BLE001  (the plugin's refusal: run the graph as compiled)
            _report(self.device, f"the plugin refused the capture: {error}")
            return None
        capture.as_tuple = isinstance(outputs, tuple)
        capture.memory = [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs]
        capture.outputs = None if self.is_backward else list(outputs)
        capture.handed, capture.in_use = [], None
        _count("captures")
        return capture

    def _replay(self, capture: _Capture, inputs: list):
        for i, target, dims in capture.copied:
            source = inputs[i]
            if source.data_ptr() != target.data_ptr():
                _copy_into(target, source, dims)
        capture.graph.replay()
        for i, buffer in capture.written_back:
            inputs[i].copy_(buffer)
        inputs.clear()
        _count("replays")
        outputs = _hand_out(capture) if self.is_backward else capture.outputs
        return tuple(outputs) if capture.as_tuple else list(outputs)


def _hand_out(capture: _Capture) -> list:
    """A backward graph's outputs: new tensors over its output memory, which
    only the caller references (so AccumulateGrad takes a gradient as it is,
    where it would copy one the capture kept a reference to)."""
    if capture.in_use is None:
        # The capture's own references, before any tensor is handed out (its
        # memory tensors keep the storages, and so the handles, alive).
        handles = {_torch_api.storage_handle(o) for o in capture.memory if isinstance(o, torch.Tensor)}
        capture.in_use = [(handle, _torch_api.storage_references(handle)) for handle in handles]
    outputs = [o.detach() if isinstance(o, torch.Tensor) else o for o in capture.memory]
    capture.handed = [weakref.ref(o) for o in outputs if isinstance(o, torch.Tensor)]
    return outputs


def _outputs_in_use(capture: _Capture) -> bool:
    """Before a backward graph replays: moves the tensors its previous replay
    handed out that are still held (torch.autograd.grad's results, kept) to
    memory of their own with their values; then whether other tensors still
    use its output memory (a .grad that took a gradient as it is: autograd's
    alias of a handed-out tensor, which cannot be moved from here)."""
    for ref in capture.handed:
        tensor = ref()
        if tensor is not None:
            tensor.data = tensor.clone()
    capture.handed = []
    return capture.in_use is not None and any(
        _torch_api.storage_references(handle) > own for handle, own in capture.in_use)
