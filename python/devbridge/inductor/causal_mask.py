"""SDPA's causal mask as a flex-attention BlockMask, in arithmetic.

create_block_mask builds a BlockMask from any mask_mod: it evaluates the
mask over the whole [L, S] grid, sums it per block and sorts every row of
blocks (kv side) and every column (q side, for the backward) to list the
blocks in order. In a graph that runs at each call, which is where
sdpa_as_flex puts it, that is about fifteen launches (four of them sorts)
before the attention kernel itself: more host time than the kernel on small
inputs. The causal mask's blocks follow from the lengths alone: along a row
of query blocks the fully visible key blocks are a prefix and the partially
visible ones the next few, and along a column likewise. So the same tensors
are a few elementwise expressions over block coordinates, which Inductor
fuses into a kernel or two.

Only for lengths that are multiples of the block size (512, 1024, ...): at
ragged ends create_block_mask's zero padding makes the partial blocks of a
column non-contiguous. Other lengths keep create_block_mask. The result
equals create_block_mask(causal, None, None, L, S) tensor for tensor
(tests/python/test_inductor_simdev_attention_fallback.py compares them).
"""

from __future__ import annotations

import torch

from . import _torch_api

BLOCK = 128  # create_block_mask's default block size, both sides


def takes(q_len, kv_len) -> bool:
    """Whether causal_block_mask builds the mask for these lengths (static
    multiples of the block size) on this torch."""
    if not all(isinstance(n, int) and n > 0 and n % BLOCK == 0 for n in (q_len, kv_len)):
        return False
    return _torch_api.block_mask_from_tensors_supported()


def causal_block_mask(q_len: int, kv_len: int, device, mask_mod):
    """The BlockMask of `mask_mod` (query i sees keys 0..i, SDPA's is_causal)
    for lengths `takes` accepts, one for every batch and head."""
    n_q, n_kv = q_len // BLOCK, kv_len // BLOCK
    rows = torch.arange(n_q, device=device, dtype=torch.int32)
    cols = torch.arange(n_kv, device=device, dtype=torch.int32)
    # Square blocks on a grid that starts at 0 on both sides: query block i
    # (queries iB .. iB+B-1) sees key blocks 0..i-1 entirely and block i in
    # part (its upper triangle hidden); key block j is seen in part by query
    # block j and entirely by the blocks after it. Key blocks past the last
    # one (S < L) and query blocks past the last (L < S) are clipped.
    full_in_row = torch.clamp(rows, max=n_kv)
    partial_in_row = (rows < n_kv).to(torch.int32)
    full_in_col = torch.clamp(n_q - 1 - cols, min=0)
    partial_in_col = (cols < n_q).to(torch.int32)

    def ordered(start, count, length):
        # create_block_mask's order: the blocks of the set [start, start +
        # count) ascending, then the others ascending
        slot = torch.arange(length, device=device, dtype=torch.int32)
        start, count = start.unsqueeze(-1), count.unsqueeze(-1)
        rest = slot - count
        return torch.where(slot < count, start + slot, torch.where(rest < start, rest, rest + count))

    def batched(tensor):  # [1, 1, ...]: the same for every batch and head
        return tensor.reshape(1, 1, *tensor.shape)

    return _torch_api.block_mask(
        (q_len, kv_len),
        batched(partial_in_row), batched(ordered(rows, partial_in_row, n_kv)),
        batched(full_in_row), batched(ordered(torch.zeros_like(rows), full_in_row, n_kv)),
        batched(partial_in_col), batched(ordered(cols, partial_in_col, n_q)),
        batched(full_in_col), batched(ordered(cols + 1, full_in_col, n_q)),
        (BLOCK, BLOCK), mask_mod)
