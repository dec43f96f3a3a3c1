"""The memory format of a plugin's convolution results, as torch.compile
predicts it.

A compiled graph asserts the strides it traced for every extern kernel's
result, and torch traces a PrivateUse1 convolution as returning a contiguous
tensor whatever its inputs (ATen's Overrideable backend). A plugin whose
convolution returns channels-last results for channels-last inputs, as cuDNN
does and as Inductor's layout optimization expects on GPUs, declares its rule
once and compiled graphs expect what it really returns:

    devbridge.inductor.declare_convolution_format("mydev", devbridge.inductor.cudnn_convolution_format)

The rule gets the convolution's input and weight (FakeTensors while tracing,
real tensors when the plugin applies the same rule in eager mode) and returns
a torch.memory_format; it must read only shapes, strides and dtypes.
"""

from __future__ import annotations

import torch


def _strides_like_channels_last(sizes, strides, order) -> bool:
    # c10's is_channels_last_strides_2d_s4 / _3d_s5 (c10/core/MemoryFormat.h),
    # which Tensor.suggest_memory_format() uses: walk the dimensions from the
    # innermost channels-last one outwards; each stride must be at least the
    # extent of the previous one, ambiguous cases (C of stride 0, N111) are
    # not channels-last.
    if strides[1] == 0:
        return False
    minimum = 0
    for d in order:
        if sizes[d] == 0 or strides[d] < minimum:
            return False
        if d == 0 and minimum == strides[1]:
            return False
        minimum = strides[d] * sizes[d] if sizes[d] > 1 else strides[d]
    return True


def suggested_memory_format(tensor: torch.Tensor) -> torch.memory_format:
    """Tensor.suggest_memory_format() of ATen, which Python does not expose."""
    if tensor.layout != torch.strided:
        return torch.contiguous_format
    sizes, strides = tensor.shape, tensor.stride()
    if tensor.dim() == 4 and _strides_like_channels_last(sizes, strides, (1, 3, 2, 0)):
        return torch.channels_last
    if tensor.dim() == 5 and _strides_like_channels_last(sizes, strides, (1, 4, 3, 2, 0)):
        return torch.channels_last_3d
    return torch.contiguous_format


def cudnn_convolution_format(input: torch.Tensor, weight: torch.Tensor) -> torch.memory_format:
    """The format cuDNN's convolutions return, which is torch's prediction for
    cuda (ATen's cudnn_conv_suggest_memory_format): channels-last when the
    input or the weight is, for 2-d and 3-d convolutions, except in float64."""
    if torch.float64 in (input.dtype, weight.dtype):
        return torch.contiguous_format
    wanted = {4: torch.channels_last, 5: torch.channels_last_3d}.get(weight.dim())
    if wanted is not None and wanted in (suggested_memory_format(input), suggested_memory_format(weight)):
        return wanted
    return torch.contiguous_format


def declare_convolution_format(device: str, rule) -> None:
    """Declare what `device`'s convolution_overrideable and
    convolution_backward_overrideable return (grad_input and grad_weight
    alike): rule(input, weight) -> torch.memory_format. Without a
    declaration torch predicts contiguous results."""
    from . import _torch_api

    if not callable(rule):
        raise TypeError(f"devbridge.inductor.declare_convolution_format({device!r}, ...): the rule must be a "
                        f"function (input, weight) -> torch.memory_format, got {type(rule).__name__}")
    if not isinstance(device, str) or not device or ":" in device:
        raise ValueError(f"devbridge.inductor.declare_convolution_format({device!r}, ...): give the device "
                         "type, e.g. 'simdev'")
    _torch_api.predict_convolution_format(device, rule)
