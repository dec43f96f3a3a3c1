"""Fused attention for a plugin that has no attention kernel of its own.

torch.compile lowers torch.nn.functional.scaled_dot_product_attention (SDPA)
to whatever the device's _fused_sdp_choice picks: a plugin's fused kernel
(SDPBackend.OVERRIDEABLE) where it has one for the inputs, else the math
decomposition, which materialises the [L, S] score matrix (a bmm, a softmax
and another bmm). Inductor also has fused attention in Triton, its
flex-attention templates, which any device Triton compiles for can run, and
which devbridge makes serve the plugin device (_torch_api.
accept_flex_attention). sdpa_flex_attention(when) lowers SDPA to them:

  "fallback"  SDPA calls the plugin has no fused kernel for (its choice is
              math): flex attention
  "always"    every SDPA call on the plugin device (comparisons, tests)
  "off"       torch's own choice (the default)

How: a pre-grad FX pass (Inductor's pre_grad_custom_pass, chained with the
one already set) rewrites each SDPA call of the graph Dynamo hands Inductor
into a call of sdpa_as_flex(), which AOTAutograd then traces like any
function: its flex_attention operator call gets Inductor's flex lowering,
forward and backward (the operator brings its own autograd). The Dynamo graph
is torch-level and carries every argument with its FakeTensor, so the pass
sees what SDPA sees; the other ways in are later and narrower: after
AOTAutograd the call is already decomposed into the math ops (or the plugin's
op), and a decomposition of aten.scaled_dot_product_attention, a
CompositeImplicitAutograd op, would have to register a kernel under a
dispatch key, which devbridge never does for a plugin's device
(docs/design.md: query, never register). The pass is a CustomGraphPass whose
uuid names the mode, so cached graphs of one mode are not served to another.

What flex attention takes, and so what is rewritten: 4-d float16, bfloat16 or
float32 query, key and value on the plugin device, head sizes of at least 16,
no dropout (flex attention has none: SDPA with dropout_p > 0 keeps the math
decomposition), is_causal, a boolean or additive attn_mask that needs no
gradient (a mask_mod or score_mod reading the mask), scale, and enable_gqa.
Anything else keeps torch's lowering.
"""

from __future__ import annotations

import hashlib
import math
import pathlib
import threading

import torch

from . import _torch_api, causal_mask

MODES = ("off", "fallback", "always")

_lock = threading.Lock()
_mode = "off"


def sdpa_flex_attention(when: str) -> str:
    """Lower SDPA on the plugin device to Inductor's flex-attention Triton
    templates in graphs compiled from now on: `when` is "fallback" (where the
    plugin has no fused kernel for the inputs), "always" or "off" (torch's
    own choice, the default). Returns the previous mode."""
    global _mode
    if when not in MODES:
        raise ValueError(f"devbridge.inductor.sdpa_flex_attention({when!r}): the mode is one of {', '.join(MODES)}")
    with _lock:
        previous, _mode = _mode, when
        installed = _torch_api.pre_grad_pass()
        if when != "off" and not isinstance(installed, _pass_class()):
            _torch_api.set_pre_grad_pass(_pass_class()(installed))
        elif when == "off" and isinstance(installed, _pass_class()):
            _torch_api.set_pre_grad_pass(installed.chained)  # the pass that was there before
    return previous


# ---------------------------------------------------------------- the traced replacement

def sdpa_as_flex(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """scaled_dot_product_attention(query, key, value, attn_mask, 0.0,
    is_causal, scale, enable_gqa) through the flex_attention operator (grouped
    query heads need nothing: the operator shares each key head among
    Hq // Hkv query heads). Called while AOTAutograd traces the graph, never
    eagerly."""
    from torch.nn.attention.flex_attention import create_block_mask

    q_len, kv_len = query.size(-2), key.size(-2)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    if is_causal:  # SDPA's causal mask is aligned top-left: query i sees keys 0..i
        if causal_mask.takes(q_len, kv_len):
            block_mask = causal_mask.causal_block_mask(q_len, kv_len, query.device, _causal)
        else:
            block_mask = create_block_mask(_causal, None, None, q_len, kv_len, device=query.device)
        return _torch_api.flex_attention_hop(query, key, value, _no_score_mod, block_mask, scale)
    if attn_mask is None:
        return _torch_api.flex_attention_hop(query, key, value, _no_score_mod,
                                             _torch_api.empty_block_mask(query, key), scale)
    mask = attn_mask.reshape((1,) * (4 - attn_mask.dim()) + tuple(attn_mask.shape))  # [B|1, H|1, L|1, S|1]
    if mask.dtype == torch.bool:
        # Blocks the mask leaves out entirely are skipped; the mask is read in the others.
        select = _mask_reader(mask)
        batch = mask.size(0) if mask.size(0) != 1 else None
        heads = mask.size(1) if mask.size(1) != 1 else None
        block_mask = create_block_mask(lambda b, h, q, kv: select(b, h, q, kv, mask), batch, heads, q_len, kv_len,
                                       device=query.device)
        return _torch_api.flex_attention_hop(query, key, value, _no_score_mod, block_mask, scale, mask_mod=select,
                                             mask_mod_buffers=(mask,))
    read = _mask_reader(mask)

    def add_mask(score, b, h, q, kv, bias):
        return score + read(b, h, q, kv, bias)

    return _torch_api.flex_attention_hop(query, key, value, add_mask, _torch_api.empty_block_mask(query, key),
                                         scale, score_mod_buffers=(mask,))


def _no_score_mod(score, b, h, q, kv):
    return score


def _causal(b, h, q, kv):
    return q >= kv


def _mask_reader(mask):
    """mask_mod-style reader of a 4-d mask that broadcasts over its size-1
    dimensions, as SDPA's attn_mask does."""
    zero = [size == 1 for size in mask.shape]

    def read(b, h, q, kv, m):
        return m[0 if zero[0] else b, 0 if zero[1] else h, 0 if zero[2] else q, 0 if zero[3] else kv]

    return read


# ---------------------------------------------------------------- the pass

_SDPA_ARGUMENTS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
_FLEX_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _bound(node) -> dict | None:
    if len(node.args) > len(_SDPA_ARGUMENTS):
        return None
    bound = dict(_SDPA_DEFAULTS)
    bound.update(zip(_SDPA_ARGUMENTS, node.args))
    bound.update(node.kwargs)
    return bound if set(bound) == set(_SDPA_ARGUMENTS) else None


def _value(argument):
    return _torch_api.example_value(argument) if isinstance(argument, torch.fx.Node) else argument


def _static_int(size) -> bool:
    return isinstance(size, int)


def _flex_takes(device: str, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> bool:
    """Whether flex attention computes exactly this SDPA call, from the
    FakeTensors Dynamo recorded."""
    q, k, v, mask = query, key, value, attn_mask
    tensors = (q, k, v)
    if not all(isinstance(t, torch.Tensor) and t.device.type == device and t.dim() == 4 for t in tensors):
        return False
    if q.dtype not in _FLEX_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    if not (isinstance(dropout_p, (int, float)) and dropout_p == 0):
        return False  # flex attention has no dropout
    if not isinstance(is_causal, bool) or not isinstance(enable_gqa, bool):
        return False
    if scale is not None and not isinstance(scale, (int, float)):
        return False
    e, ev, hq, hkv = q.size(-1), v.size(-1), q.size(1), k.size(1)
    if not all(_static_int(n) for n in (e, ev, hq, hkv)) or min(e, ev) < 16:
        return False  # the templates' tl.dot needs head sizes of 16 and more
    if k.size(1) != v.size(1) or k.size(-1) != e or q.size(0) != k.size(0) or k.size(0) != v.size(0):
        return False
    if hq != hkv and not (enable_gqa and hq % hkv == 0):
        return False  # SDPA raises for these: keep its error
    if mask is not None:
        if is_causal or not isinstance(mask, torch.Tensor) or mask.requires_grad or mask.dim() > 4:
            return False
        if mask.device != q.device or mask.dtype not in (torch.bool, q.dtype):
            return False
        target = (q.size(0), hq, q.size(2), k.size(2))[4 - mask.dim():]
        if any(m != 1 and m != t for m, t in zip(mask.shape, target)):
            return False
    return True


def rewrite_sdpa(graph: torch.fx.Graph, device: str, mode: str) -> int:
    """Replace the SDPA calls of `graph` that flex attention computes (and,
    in "fallback" mode, that the plugin has no fused kernel for) by calls of
    sdpa_as_flex. Returns how many were replaced."""
    replaced = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.nn.functional.scaled_dot_product_attention:
            continue
        bound = _bound(node)
        if bound is None:
            continue
        values = {name: _value(argument) for name, argument in bound.items()}
        if not _flex_takes(device, **values):
            continue
        if mode == "fallback":
            try:
                if not _torch_api.sdpa_runs_math(*(values[name] for name in _SDPA_ARGUMENTS)):
                    continue  # the plugin's own fused kernel
            except Exception:  # noqa: BLE001 - no backend takes them: torch's lowering raises its own error
                continue
        node.target = sdpa_as_flex
        node.args = (bound["query"], bound["key"], bound["value"])
        node.kwargs = {"attn_mask": bound["attn_mask"], "is_causal": bound["is_causal"], "scale": bound["scale"]}
        replaced += 1
    return replaced


_pass_classes: list = []


def _pass_class():
    """The pass class (a CustomGraphPass, whose base lives in torch's
    Inductor: made at first use, so importing this module imports none of
    it)."""
    if _pass_classes:
        return _pass_classes[0]
    base = _torch_api.custom_graph_pass_base()
    source = hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:16]

    class SdpaFlexAttentionPass(base):
        """Rewrites SDPA on the plugin device (rewrite_sdpa), then runs the
        pre-grad pass that was set before (`chained`)."""

        def __init__(self, chained):
            self.chained = chained

        def _chained(self) -> tuple:
            if self.chained is None:
                return ()
            return tuple(self.chained) if isinstance(self.chained, (list, tuple)) else (self.chained,)

        def __call__(self, graph):
            from . import registered

            device = registered()
            if _mode != "off" and device is not None:
                rewrite_sdpa(graph, device, _mode)
            for custom_pass in self._chained():
                custom_pass(graph)

        def uuid(self):
            chained = []
            for custom_pass in self._chained():
                identity = getattr(custom_pass, "uuid", lambda: None)()
                if identity is None:
                    return None  # as the chained pass alone: Inductor runs it uncached
                chained.append(identity)
            return ("devbridge.inductor.sdpa_flex_attention", _mode, source, *chained)

    _pass_classes.append(SdpaFlexAttentionPass)
    return SdpaFlexAttentionPass
