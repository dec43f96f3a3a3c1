"""SDPA's causal mask as a flex-attention BlockMask, in arithmetic.

create_block_mask builds a BlockMask from any mask_mod: it evaluates the
mask over the whole [L, S] grid, sums it per block and sorts every row of
blocks (kv side) and every column (q side, for the backward) to list the
blocks in order. In a graph that runs at each call, which is where
sdpa_as_flex puts it, that is about fifteen launches (four of them sorts)
before the attention kernel itself: more host time than the kernel on small
inputs. The causal mask's blocks follow from the lengths alone, so the same
tensors are a few elementwise expressions over block coordinates, which
Inductor fuses into a kernel or two.

Any static lengths: create_block_mask pads both lengths to whole blocks and
counts the padding as hidden, so a block that holds padding (the last row
of query blocks when L is not a multiple of the block size, the last column
of key blocks likewise) is never full, only partial. That leaves every set
this module lists a run of consecutive blocks, but for one: a column's
partial query blocks are its diagonal block and, apart from it, the ragged
last block. The result equals create_block_mask(causal, None, None, L, S)
tensor for tensor (tests/python/test_inductor_simdev_attention_fallback.py
compares them over aligned and ragged lengths).
"""

from __future__ import annotations

import torch

from . import _torch_api

BLOCK = 128  # create_block_mask's default block size, both sides


def takes(q_len, kv_len) -> bool:
    """Whether causal_block_mask builds the mask for these lengths (static,
    positive) on this torch."""
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (q_len, kv_len)):
        return False
    return _torch_api.block_mask_from_tensors_supported()


def causal_block_mask(q_len: int, kv_len: int, device, mask_mod):
    """The BlockMask of `mask_mod` (query i sees keys 0..i, SDPA's is_causal)
    for lengths `takes` accepts, one for every batch and head."""
    n_q, n_kv = -(-q_len // BLOCK), -(-kv_len // BLOCK)
    # Blocks without padding: the first whole_q query blocks, whole_kv key
    # blocks. Where both lengths are whole blocks (the usual training shapes)
    # the expressions below reduce to the plain ones, which Inductor fuses
    # into fewer kernels; the padded blocks' terms are added only when there
    # are padded blocks.
    whole_q, whole_kv = q_len // BLOCK, kv_len // BLOCK
    q_ragged, kv_ragged = whole_q < n_q, whole_kv < n_kv
    rows = torch.arange(n_q, device=device, dtype=torch.int32)
    cols = torch.arange(n_kv, device=device, dtype=torch.int32)
    # Square blocks on a grid that starts at 0 on both sides: block (i, j)
    # has a visible entry when j <= i, and is full when j < i and it holds
    # no padding. Query block i sees key blocks 0..min(i, n_kv - 1): the
    # first min(i, whole_kv) fully and the next one, where there is one, in
    # part (the diagonal, or the padded last key block), unless i is the
    # padded query block, which sees them all in part. Key block j is seen
    # by query blocks j..n_q - 1: j+1..whole_q - 1 fully and j in part, and
    # the padded last query block in part; the padded key block by all of
    # them in part.
    full_in_row = torch.clamp(rows, max=whole_kv)
    partial_in_row = torch.ones_like(rows) if kv_ragged else (rows < n_kv).to(torch.int32)
    if q_ragged:
        padded_row = rows >= whole_q
        full_in_row = torch.where(padded_row, 0, full_in_row)
        partial_in_row = torch.where(padded_row, torch.clamp(rows, max=n_kv - 1) + 1, partial_in_row)
    full_in_col = torch.clamp(whole_q - 1 - cols, min=0)
    partial_in_col = (cols < n_q).to(torch.int32)  # the diagonal block
    if kv_ragged:
        padded_col = cols >= whole_kv
        full_in_col = torch.where(padded_col, 0, full_in_col)
        partial_in_col = torch.where(padded_col, torch.clamp(n_q - cols, min=0), partial_in_col)
    # The padded last query block, past the column's run of partial blocks.
    last_in_col = ((cols < n_q - 1) & (cols < whole_kv)).to(torch.int32) if q_ragged else None

    def ordered(length, start, count, extra_start=None, extra_count=None):
        # create_block_mask's order: the blocks of the set ascending, then the
        # others ascending. The set is the run [start, start + count) and,
        # where extra_count is 1, the block extra_start after that run.
        slot = torch.arange(length, device=device, dtype=torch.int32)
        start, count = start.unsqueeze(-1), count.unsqueeze(-1)
        if extra_count is None:
            rest = slot - count
            return torch.where(slot < count, start + slot, torch.where(rest < start, rest, rest + count))
        extra_count = extra_count.unsqueeze(-1)
        # the k-th block outside the set: k, moved past each part of the set it reaches
        other = slot - count - extra_count
        other = torch.where(other >= start, other + count, other)
        other = torch.where(other >= extra_start, other + extra_count, other)
        member = torch.where(slot < count, start + slot, extra_start)
        return torch.where(slot < count + extra_count, member, other)

    def batched(tensor):  # [1, 1, ...]: the same for every batch and head
        return tensor.reshape(1, 1, *tensor.shape)

    # A row's partial blocks follow its full ones; with whole blocks both
    # ways that is the diagonal, the row's own index (fewer kernels again).
    partial_start_in_row = full_in_row if q_ragged or kv_ragged else rows
    q_num_blocks = partial_in_col if last_in_col is None else partial_in_col + last_in_col
    return _torch_api.block_mask(
        (q_len, kv_len),
        batched(partial_in_row), batched(ordered(n_kv, partial_start_in_row, partial_in_row)),
        batched(full_in_row), batched(ordered(n_kv, torch.zeros_like(rows), full_in_row)),
        batched(q_num_blocks), batched(ordered(n_q, cols, partial_in_col, n_q - 1, last_in_col)),
        batched(full_in_col), batched(ordered(n_q, cols + 1, full_in_col)),
        (BLOCK, BLOCK), mask_mod)
