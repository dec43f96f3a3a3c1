"""The one fix for a plugin without native stream handles, shared by every
check that needs them (the native-handle check itself, devbridge's
current_work_stream, the Triton launch), so each fails with the same words."""

from __future__ import annotations

from .plugin import Backend
from .result import CheckFailed

GUARD = "the plugin's c10::impl::DeviceGuardImplInterface (C10_REGISTER_GUARD_IMPL(PrivateUse1, ...))"
NATIVE_HANDLE_FIX = (f"override getStreamNativeHandle(Stream) in {GUARD} (torch >= 2.11) to return "
                     "the backend's stream pointer; plugins that cannot do that register a resolver "
                     "with devbridge.register_stream_resolver() instead")


def require_native_stream(backend: Backend, index: int) -> str:
    """Where devbridge gets the native stream of `backend`:`index` ("guard",
    "resolver", "current-stream-query"); a clean failure when nowhere."""
    from devbridge import _C

    source = _C.native_stream_source(backend.name, index)
    if source == "missing":
        raise CheckFailed(
            f"devbridge has no native stream handle for {backend.name}: the device guard does not "
            "override getStreamNativeHandle and no stream resolver is registered, so kernels would "
            "get no stream (or NULL with allow_null_stream, i.e. the default stream)",
            NATIVE_HANDLE_FIX)
    return source
