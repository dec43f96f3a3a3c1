"""Graph capture on a plugin device: record the work queued on one of the
plugin's streams once, replay it many times without the host-side cost of
launching it again.

The user-facing shape follows torch.cuda.CUDAGraph and torch.cuda.graph::

    g = devbridge.graphs.Graph()
    static_x = torch.randn(1024, device="simdev")
    y = f(static_x)                        # warm up (compiles, caches) outside the capture
    with devbridge.graphs.graph(g):        # captured on a side stream of the device
        static_y = f(static_x)
    static_x.copy_(new_x)                  # refill the static input...
    g.replay()                             # ...and rerun f on the current stream
    print(static_y)

It works on any PrivateUse1 plugin that registered a graph table
(include/devbridge/c_graph_api.h) with `register_graph_api`, as simdev does;
for another plugin every entry point raises NotImplementedError naming what the
plugin must register. The plugin records the work and owns the memory
allocated during the capture (its capture pool) until the graph is reset, so
tensors created inside the capture are the graph's static outputs.

torch >= 2.13 also has torch.accelerator.Graph, backed by a per-backend
implementation that a backend registers inside torch; devbridge does not use
it (torch 2.11 lacks it, and a plugin that registers one can still register
this table). docs/plugin-authors.md ("Graph capture") says how they relate.
"""

from __future__ import annotations

import gc

import torch

from . import _C, _device_names

__all__ = ["Graph", "graph", "is_available", "is_current_stream_capturing", "register_graph_api"]

_CAPSULE_NAME = "devbridge_graph_api"
_STATUS_NAMES = {0: "none", 1: "active", 2: "invalidated"}


def register_graph_api(table, device_type="privateuseone") -> None:
    """Register the plugin's graph table: a PyCapsule named "devbridge_graph_api"
    holding a `DevbridgeGraphAPI*` (include/devbridge/c_graph_api.h, static
    storage), or None to forget it. A plugin calls it when it is imported,
    beside devbridge.register_current_stream_query. A bad table (NULL functions,
    another major version, a size too small for its minor) is refused with a
    ValueError naming the field."""
    if table is not None and type(table).__name__ != "PyCapsule":
        raise TypeError(f"devbridge: a graph table must be a PyCapsule named '{_CAPSULE_NAME}' holding a "
                        f"DevbridgeGraphAPI* (include/devbridge/c_graph_api.h), or None; got {type(table).__name__}")
    _C._register_graph_api(table, _plugin_type(device_type))


def _plugin_type(device_type) -> str:
    name = _device_names.device_type(device_type)  # refuses a name torch does not know, naming the plugin
    if name == "cuda":
        raise ValueError("devbridge.graphs serves PrivateUse1 plugin devices; for cuda use torch.cuda.CUDAGraph "
                         "and torch.cuda.graph")
    return name


def is_available(device_type="privateuseone") -> bool:
    """Whether the plugin registered a graph table (graphs can be captured)."""
    return bool(_C._has_graph_api(_plugin_type(device_type)))


def _plugin_device(device) -> torch.device:
    """The plugin device `device` names (None: the current accelerator device)."""
    if device is None:
        device = torch.accelerator.current_accelerator()
        if device is None:
            raise RuntimeError("devbridge.graphs: no accelerator is loaded; import the plugin, or pass its device")
    device = _device_names.checked_device(device) if isinstance(device, str) else torch.device(device)
    _plugin_type(device.type)
    if device.type != _C.plugin_name():
        raise ValueError(f"devbridge.graphs: {device} is not the PrivateUse1 plugin's device "
                         f"({_C.plugin_name()!r}); graphs capture the plugin's streams")
    index = device.index if device.index is not None else _C.current_device(device.type)
    return torch.device(device.type, index)


def _stream_of(stream, device: torch.device | None) -> tuple[torch.device, int]:
    """(device, native handle) of `stream`: a torch.Stream of the plugin, or
    None for the current stream of `device` (None: the current device)."""
    if stream is None:
        device = _plugin_device(device)
        return device, _C.current_stream(device.index, device.type)
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"devbridge.graphs: expected a torch.Stream of the plugin device or None, got {stream!r}")
    stream_device = _plugin_device(stream.device)
    if device is not None and _plugin_device(device) != stream_device:
        raise ValueError(f"devbridge.graphs: the stream is on {stream_device}, but the graph is for "
                         f"{_plugin_device(device)}; pass a stream of {_plugin_device(device)}")
    return stream_device, _C._stream_native_handle(stream_device.type, stream_device.index, stream.stream_id)


def is_current_stream_capturing(device=None) -> bool:
    """Whether the current stream of `device` (None: the current device) is
    capturing, like torch.cuda.is_current_stream_capturing(). False where the
    plugin registered no graph table."""
    device, handle = _stream_of(None, device)
    if not _C._has_graph_api(device.type):
        return False
    return _C._graph_capture_status(device.type, device.index, handle) != 0


class Graph:
    """A graph of the work queued on one plugin stream, like torch.cuda.CUDAGraph.

    capture_begin(stream) ... capture_end() records it (graph() does both and
    makes the stream current); replay(stream) runs it again on a stream of the
    same device, in order, with no host synchronisation. With keep_graph=False
    (the default) capture_end instantiates the graph and keeps only the
    executable; with keep_graph=True call instantiate() (or replay(), which
    instantiates first). reset() destroys both and gives the capture's memory
    back; a Graph can then capture again.
    """

    def __init__(self, keep_graph: bool = False):
        self._keep_graph = bool(keep_graph)
        self._device: torch.device | None = None
        self._capture_stream: int | None = None  # native handle while capturing
        self._graph: int | None = None
        self._exec: int | None = None

    @property
    def device(self) -> torch.device | None:
        """The device the graph was captured on (None before a capture)."""
        return self._device

    def capture_begin(self, stream: torch.Stream | None = None, pool=None) -> None:
        """Start recording `stream` (None: the current stream of the current
        device). Work queued on that stream until capture_end() is recorded, not
        run; the caller makes it the current stream (graph() does), so that the
        device's operators and kernels queue their work there."""
        if pool is not None:
            raise ValueError("devbridge.graphs: sharing a memory pool between graphs (pool=...) is not supported "
                             "yet; pass pool=None (each graph owns the memory allocated during its capture)")
        if self._capture_stream is not None:
            raise RuntimeError("devbridge.graphs: this Graph is already capturing; call capture_end() first")
        if self._graph is not None or self._exec is not None:
            raise RuntimeError("devbridge.graphs: this Graph already holds a capture; call reset() before "
                               "capturing again")
        device, handle = _stream_of(stream, None)
        _C._graph_capture_begin(device.type, device.index, handle)
        self._device, self._capture_stream = device, handle

    def capture_end(self) -> None:
        """Stop recording. Raises the plugin's error when the capture was
        invalidated (a synchronisation during the capture, ...); the capture
        has ended either way."""
        if self._capture_stream is None:
            raise RuntimeError("devbridge.graphs: capture_end() without capture_begin()")
        device, handle = self._device, self._capture_stream
        self._capture_stream = None
        try:
            self._graph = _C._graph_capture_end(device.type, device.index, handle)
        except BaseException:
            self._device = None
            raise
        if not self._keep_graph:
            self.instantiate()
            _C._graph_destroy(device.type, self._graph)
            self._graph = None

    def instantiate(self) -> None:
        """Make the executable of a graph captured with keep_graph=True
        (replay() does it when needed)."""
        if self._exec is not None:
            return
        if self._graph is None:
            raise RuntimeError("devbridge.graphs: instantiate() without a preceding successful capture")
        self._exec = _C._graph_instantiate(self._device.type, self._graph)

    def replay(self, stream: torch.Stream | None = None) -> None:
        """Queue the recorded work on `stream` (None: the current stream of the
        graph's device), which must be a stream of the graph's device."""
        exec_, device = self._exec, self._device
        if stream is None and exec_ is not None:
            # The hot path of reduce-overhead: the device was checked at the
            # capture, so only its current stream is asked for.
            _C._graph_replay(device.type, exec_, device.index, _C.current_stream(device.index, device.type))
            return
        if self._capture_stream is not None:
            raise RuntimeError("devbridge.graphs: replay() while this Graph is capturing; call capture_end() "
                               "first")
        if self._exec is None:
            if self._graph is None:
                raise RuntimeError("devbridge.graphs: replay() without a preceding successful capture; capture "
                                   "with graph(g) or capture_begin()/capture_end() first")
            self.instantiate()
        device, handle = _stream_of(stream, self._device)
        _C._graph_replay(device.type, self._exec, device.index, handle)

    def reset(self) -> None:
        """Destroy the graph and its executable; the memory allocated during the
        capture returns to the allocator once the replays queued so far have
        run. Idempotent."""
        if self._capture_stream is not None:
            raise RuntimeError("devbridge.graphs: reset() while capturing; call capture_end() first")
        exec_, graph_, device = self._exec, self._graph, self._device
        self._exec = self._graph = None
        if exec_ is not None:
            _C._graph_exec_destroy(device.type, exec_)
        if graph_ is not None:
            _C._graph_destroy(device.type, graph_)

    def __del__(self):
        if getattr(self, "_capture_stream", None) is None:
            try:
                self.reset()
            except Exception:  # noqa: BLE001  (interpreter shutdown: the plugin may be gone)
                pass


_side_streams: dict[torch.device, torch.Stream] = {}


class graph:
    """Capture the work of the `with` block into `g`, like torch.cuda.graph.

    The block runs with `stream` (None: a side stream of the current device,
    one per device, reused) as the current stream and its device as the
    current device. Before the capture the stream waits for the work queued
    on the device's current stream (the inputs the block reads), and
    unreachable Python objects are collected, so that no tensor of an earlier
    step is freed during the capture. An exception in the block ends the
    capture and propagates; `g` is then empty.
    """

    def __init__(self, g: Graph, stream: torch.Stream | None = None, pool=None):
        if not isinstance(g, Graph):
            raise TypeError(f"devbridge.graphs.graph: expected a devbridge.graphs.Graph, got {g!r}")
        self._graph, self._pool = g, pool
        if stream is None:
            device = _plugin_device(None)
            stream = _side_streams.get(device)
            if stream is None:
                stream = _side_streams[device] = torch.Stream(device=device)
        elif not isinstance(stream, torch.Stream):
            raise TypeError(f"devbridge.graphs.graph: expected a torch.Stream of the plugin device or None, "
                            f"got {stream!r}")
        self._stream = stream
        self._device = _plugin_device(stream.device)

    def __enter__(self):
        gc.collect()
        self._previous_device = torch.accelerator.current_device_index()
        torch.accelerator.set_device_index(self._device.index)
        self._previous_stream = torch.accelerator.current_stream(self._device)
        self._stream.wait_stream(self._previous_stream)
        torch.accelerator.set_stream(self._stream)
        try:
            self._graph.capture_begin(self._stream, pool=self._pool)
        except BaseException:
            self._restore()
            raise
        return self._stream

    def __exit__(self, exc_type, exc, traceback):
        try:
            if exc_type is None:
                self._graph.capture_end()
                return False
            try:  # the block failed: end the capture, and report the block's error
                self._graph.capture_end()
            except Exception as end_error:  # noqa: BLE001  (the block's error is the one to see)
                if hasattr(exc, "add_note"):
                    exc.add_note(f"devbridge.graphs: the capture ended with: {end_error}")
            self._graph.reset()
            return False
        finally:
            self._restore()

    def _restore(self):
        torch.accelerator.set_stream(self._previous_stream)
        torch.accelerator.set_device_index(self._previous_device)
