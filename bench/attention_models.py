"""The transformer models of bench/attention.py, all attending through
torch.nn.functional.scaled_dot_product_attention, in bfloat16.

From `transformers` configurations where it is installed (attn_implementation
"sdpa"): a GPT-2-style model (6 layers, 768 wide, 12 heads) and a Llama-style
one (8 layers, 1024 wide, 16 query heads over 4 key/value heads: grouped-query
attention). Without `transformers`, blocks of our own with the same shapes
and the same attention calls stand in (the rows name which ran)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

VOCAB = 8192
GPT2 = dict(layers=6, width=768, heads=12, kv_heads=12, mlp=3072)
LLAMA = dict(layers=8, width=1024, heads=16, kv_heads=4, mlp=2816)


def source() -> str:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "devbridge's blocks (transformers is not installed)"
    return f"transformers {transformers.__version__}"


def make(kind: str) -> torch.nn.Module:
    """The model `kind` ("gpt2" or "llama"), on the CPU, in float32 (the caller
    moves it to a device and a dtype), its weights drawn from seed 0."""
    torch.manual_seed(0)
    try:
        import transformers
    except ImportError:
        return _OwnModel(**(GPT2 if kind == "gpt2" else LLAMA), gpt2=kind == "gpt2")
    if kind == "gpt2":
        config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=GPT2["width"],
                                         n_layer=GPT2["layers"], n_head=GPT2["heads"], resid_pdrop=0.0,
                                         embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel._from_config(config, attn_implementation="sdpa")
    else:
        config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=LLAMA["width"],
                                          intermediate_size=LLAMA["mlp"], num_hidden_layers=LLAMA["layers"],
                                          num_attention_heads=LLAMA["heads"], num_key_value_heads=LLAMA["kv_heads"],
                                          max_position_embeddings=2048)
        model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa")
    return _Logits(model)


class _Logits(torch.nn.Module):
    """A `transformers` causal LM returning its logits alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(input_ids=tokens, use_cache=False).logits


class _OwnBlock(torch.nn.Module):
    def __init__(self, width, heads, kv_heads, mlp, gpt2):
        super().__init__()
        self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
        norm = torch.nn.LayerNorm if gpt2 else torch.nn.RMSNorm
        self.norm1, self.norm2 = norm(width), norm(width)
        self.qkv = torch.nn.Linear(width, (heads + 2 * kv_heads) * self.head, bias=gpt2)
        self.proj = torch.nn.Linear(width, width, bias=gpt2)
        self.up = torch.nn.Linear(width, mlp * (1 if gpt2 else 2), bias=gpt2)
        self.down = torch.nn.Linear(mlp, width, bias=gpt2)
        self.gpt2 = gpt2

    def forward(self, x):
        b, length, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.heads * self.head, self.kv_heads * self.head, self.kv_heads * self.head], dim=-1)
        q = q.view(b, length, self.heads, self.head).transpose(1, 2)
        k = k.view(b, length, self.kv_heads, self.head).transpose(1, 2)
        v = v.view(b, length, self.kv_heads, self.head).transpose(1, 2)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, length, -1))
        h = self.up(self.norm2(x))
        if self.gpt2:
            h = F.gelu(h, approximate="tanh")
        else:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        return x + self.down(h)


class _OwnModel(torch.nn.Module):
    def __init__(self, layers, width, heads, kv_heads, mlp, gpt2):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, width)
        self.blocks = torch.nn.ModuleList(_OwnBlock(width, heads, kv_heads, mlp, gpt2) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width) if gpt2 else torch.nn.RMSNorm(width)
        self.head = torch.nn.Linear(width, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
