"""Which of torch's OpInfo operators (torch.testing._internal's op_db) the
differential torch.compile test runs on simdev, with which dtypes and
samples, and how one case is judged (test_inductor_simdev_opinfo_*.py).

Selected: the operators Inductor lowers to Triton kernels of its own:
every elementwise unary and binary ufunc (special.* included), every
reduction, and the named groups below (normalization, softmax-likes,
scans and sorts, indexing/scatter/gather, layout and concatenation, pooling
and resampling, losses, factories). Excluded, each group with its reason:
EXCLUDED. Neither selected nor excluded (not listed here): views and other
metadata-only operators (no kernel to check) and the selections Inductor
leaves to ATen (median, mode, kthvalue, quantile, topk...).

A case is one (operator, dtype): its first few samples (SAMPLES), made on the
CPU (make_tensor, fixed seed) and copied to simdev, compiled together in one
graph (one Inductor compile instead of one per sample) and compared with
eager on the CPU. Only when simdev fails or disagrees, each sample is
compiled alone, and a failing one is compiled on the CPU as well (Inductor's
C++ backend, slow): simdev is at fault only where the compiled CPU passes.
"""

from __future__ import annotations

import faulthandler
import itertools
import os
import traceback
from dataclasses import dataclass

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.utils import _pytree as pytree

from torch.testing._internal.common_methods_invocations import op_db  # needs expecttest
from torch.testing._internal.opinfo.core import (
    BinaryUfuncInfo, ReductionOpInfo, ShapeFuncInfo, UnaryUfuncInfo)

DEVICE = "simdev"
# Samples per case: the first three for float32 (OpInfo's first samples are
# its small, scalar and broadcasting ones), the first two for the other
# dtypes, which check the dtype's arithmetic and casts rather than shapes.
SAMPLES = {torch.float32: 3}
OTHER_SAMPLES = 2

# Named below but not in every supported torch's op_db (the name check allows them there).
NOT_IN_EVERY_TORCH = {"native_group_norm": "in op_db from torch 2.13 (not in 2.11's)"}

# Every operator of these classes is selected unless EXCLUDED.
SELECTED_CLASSES = (UnaryUfuncInfo, BinaryUfuncInfo, ReductionOpInfo, ShapeFuncInfo)

# Operators of the plain OpInfo class that Inductor lowers to Triton kernels.
SELECTED_GROUPS = {
    "pointwise": (
        "addcmul", "addcdiv", "clamp", "lerp", "logaddexp2", "where", "masked_fill", "isin", "to",
        "nn.functional.hardswish", "nn.functional.leaky_relu", "nn.functional.gelu", "nn.functional.glu",
        "nn.functional.cosine_similarity", "nn.functional.pairwise_distance", "dist", "cross"),
    "reductions and scans": (
        "max.reduction_with_dim", "max.reduction_no_dim", "min.reduction_with_dim", "min.reduction_no_dim",
        "aminmax", "var_mean", "var_mean.unbiased", "std_mean", "std_mean.unbiased", "logsumexp",
        "norm", "norm.fro", "norm.inf", "trace", "diff", "cumsum", "cumprod", "cummax", "cummin",
        "logcumsumexp", "sort", "argsort", "msort"),
    "normalization": (
        "nn.functional.layer_norm", "native_layer_norm", "nn.functional.rms_norm", "nn.functional.group_norm",
        "native_group_norm", "nn.functional.batch_norm", "native_batch_norm", "_native_batch_norm_legit",
        "nn.functional.instance_norm", "nn.functional.normalize", "nn.functional.local_response_norm",
        "renorm"),
    "softmax-likes": (
        "softmax", "softmax.with_dtype", "log_softmax", "log_softmax.with_dtype", "nn.functional.softmin",
        "nn.functional.softmin.with_dtype", "_softmax_backward_data", "torch.ops.aten._safe_softmax.default",
        "masked.softmax", "masked.log_softmax", "masked.softmin", "masked.normalize", "masked.logaddexp",
        "masked.cumsum", "masked.cumprod"),
    "indexing, scatter, gather": (
        "gather", "scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.prod", "scatter_reduce.mean",
        "scatter_reduce.amin", "scatter_reduce.amax", "index_select", "index_add", "index_copy", "index_fill",
        "index_put", "index_reduce.mean", "index_reduce.prod", "index_reduce.amin", "index_reduce.amax",
        "take", "take_along_dim", "put", "__getitem__", "_unsafe_masked_index",
        "_unsafe_masked_index_put_accumulate", "masked_scatter", "nn.functional.embedding",
        "nn.functional.one_hot", "select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter",
        "bucketize", "searchsorted"),
    "layout and concatenation": (
        "cat", "stack", "hstack", "vstack", "dstack", "column_stack", "_chunk_cat", "flip", "fliplr",
        "flipud", "roll", "rot90", "tril", "triu", "diag", "diag_embed", "diagflat", "constant_pad_nd",
        "nn.functional.pad.constant", "nn.functional.pad.reflect", "nn.functional.pad.replicate",
        "nn.functional.pad.replicate_negative", "nn.functional.pad.circular", "clone", "contiguous",
        "expand_copy", "permute_copy", "narrow_copy", "transpose_copy", "unfold_copy", "diagonal_copy",
        "as_strided_copy", "nn.functional.pixel_shuffle", "nn.functional.pixel_unshuffle",
        "nn.functional.channel_shuffle"),
    "pooling and resampling": (
        "nn.functional.avg_pool1d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
        "nn.functional.max_pool1d", "nn.functional.max_pool2d", "nn.functional.max_pool3d",
        "max_pool2d_with_indices_backward", "nn.functional.adaptive_avg_pool1d",
        "nn.functional.adaptive_avg_pool2d", "nn.functional.adaptive_max_pool2d",
        "nn.functional.interpolate.nearest", "nn.functional.interpolate.nearest-exact",
        "nn.functional.interpolate.linear", "nn.functional.interpolate.bilinear",
        "nn.functional.interpolate.bicubic", "nn.functional.upsample_nearest", "nn.functional.grid_sample",
        "grid_sampler_2d", "nn.functional.unfold"),
    "losses": (
        "nn.functional.mse_loss", "nn.functional.l1_loss", "nn.functional.smooth_l1_loss",
        "nn.functional.huber_loss", "nn.functional.binary_cross_entropy",
        "nn.functional.binary_cross_entropy_with_logits", "nn.functional.soft_margin_loss",
        "nn.functional.kl_div", "nn.functional.nll_loss", "nn.functional.cross_entropy",
        "nn.functional.margin_ranking_loss", "nn.functional.hinge_embedding_loss",
        "nn.functional.poisson_nll_loss", "nn.functional.gaussian_nll_loss",
        "nn.functional.cosine_embedding_loss", "nn.functional.multilabel_soft_margin_loss"),
    "factories": (
        "arange", "linspace", "logspace", "full", "full_like", "zeros_like", "ones_like", "zeros", "ones",
        "eye", "scalar_tensor", "new_full", "new_zeros", "new_ones", "tril_indices", "triu_indices"),
}

# Excluded, whatever their class: (reason, names, name prefixes).
EXCLUDED = (
    ("random: every run draws other numbers, nothing to compare",
     ("cauchy", "exponential", "geometric", "log_normal", "normal", "normal.in_place", "normal.number_mean",
      "uniform", "bernoulli", "multinomial", "randn", "randn_like", "rand_like", "randint", "randint_like",
      "nn.functional.rrelu", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
      "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
      "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d"), ()),
    ("uninitialized memory: nothing to compare",
     ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"), ()),
    ("output shape depends on the data: Inductor leaves it to ATen, no Triton kernel",
     ("nonzero", "nonzero_static", "argwhere", "unique", "unique_consecutive", "masked_select",
      "repeat_interleave", "bincount", "histc", "histogram", "histogramdd", "combinations"), ()),
    ("returns a Python value, not a tensor: a graph break, nothing compiled",
     ("item", "allclose", "equal"), ()),
    ("complex results: simdev's Triton path has no complex dtypes",
     ("complex", "polar", "view_as_complex", "view_as_real", "cfloat", "cdouble", "chalf",
      "nn.functional.silu.complex"), ()),
    ("sparse layouts: not a Triton kernel", ("to_sparse",), ("sparse.",)),
    ("linear algebra, FFT and matrix products: extern kernels or ATen fallbacks, not Triton kernels "
     "(test_inductor_simdev.py covers mm and conv)",
     ("addmm", "addmm.decomposed", "addmv", "addbmm", "baddbmm", "dot", "vdot", "bmm", "mv", "addr", "mm",
      "matmul", "__rmatmul__", "einsum", "tensordot", "inner", "outer", "kron", "cdist", "nn.functional.pdist",
      "corrcoef", "cov", "cholesky", "cholesky_inverse", "cholesky_solve", "lu", "lu_unpack", "lu_solve",
      "qr", "svd", "svd_lowrank", "pca_lowrank", "geqrf", "ormqr", "triangular_solve", "matrix_exp",
      "pinverse", "logdet", "stft", "istft", "nn.functional.linear", "nn.functional.bilinear",
      "torch._scaled_mm", "torch._scaled_mm_v2", "nn.functional.scaled_dot_product_attention",
      "nn.functional.multi_head_attention_forward"),
     ("linalg.", "fft.", "nn.functional.conv")),
    ("CUDA-only: no CPU reference", ("bmm.triton_optimized", "torch.ops.aten._flash_attention_forward",
                                     "torch.ops.aten._efficient_attention_forward"), ("jiterator_",)),
)

# linalg.vector_norm is a reduction Inductor lowers like any other.
KEPT_DESPITE_PREFIX = ("linalg.vector_norm",)

BF16_EXTRA = ("to", "sum", "mean", "amax", "softmax", "log_softmax", "nn.functional.layer_norm", "cumsum",
              "where", "clamp", "cat")
INT64_UNARY = ("abs", "neg", "sign", "bitwise_not", "square", "bool", "float", "bfloat16", "byte", "char",
               "short", "int", "long", "double", "half")
INT64_EXTRA = ("cumsum", "gather", "scatter", "scatter_add", "index_select", "where", "cat", "flip", "clamp",
               "sort")
BOOL_OPS = ("logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
            "bitwise_xor", "bitwise_not", "any", "all", "eq", "ne", "where", "float", "long", "bfloat16")


def exclusion(name):
    """The reason `name` is excluded, or None."""
    if name in KEPT_DESPITE_PREFIX:
        return None
    for reason, names, prefixes in EXCLUDED:
        if name in names or name.startswith(prefixes):
            return reason
    return None


def _selected(op):
    named = set(itertools.chain.from_iterable(SELECTED_GROUPS.values()))
    return (isinstance(op, SELECTED_CLASSES) or op.full_name in named) and exclusion(op.full_name) is None


def _dtypes(op):
    """float32 for all; bfloat16 for the pointwise ufuncs and a few others;
    int64 and bool where the operator is natural on integers and booleans;
    each only where the OpInfo says the CPU supports it."""
    name = op.full_name
    wanted = [torch.float32]
    if isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo)) or name in BF16_EXTRA:
        wanted.append(torch.bfloat16)
    if (isinstance(op, (BinaryUfuncInfo, ReductionOpInfo)) or name in INT64_UNARY
            or name in INT64_EXTRA):
        wanted.append(torch.int64)
    if name in BOOL_OPS:
        wanted.append(torch.bool)
    supported = op.supported_dtypes("cpu")
    return [d for d in wanted if d in supported]


def cases(part=None, parts=2):
    """(OpInfo, dtype) of every selected operator, by name; with `part`, the
    cases of that part: the operators in alphabetical order cut into `parts`
    runs of about as many cases (one test file each: pytest-xdist's
    --dist loadfile gives whole files to its workers)."""
    every = [(op, dtype) for op in sorted(filter(_selected, op_db), key=lambda op: op.full_name)
             for dtype in _dtypes(op)]
    if part is None:
        return every
    first, last = (len(every) * p // parts for p in (part, part + 1))
    # an operator's cases stay together, in the part its first case is in
    starts = {op.full_name: index for index, (op, _) in reversed(list(enumerate(every)))}
    return [case for case in every if first <= starts[case[0].full_name] < last]


def case_id(case):
    op, dtype = case
    return f"{op.full_name}-{str(dtype).removeprefix('torch.')}"


# ---------------------------------------------------------------- judging

# Operators whose bfloat16 results are exact: each output element is one
# rounding of the same float32 value (casts, exactly rounded arithmetic) or a
# moved input element. A conversion that truncates instead of rounding to
# nearest even is one unit in the last place off: inside any tolerance, so
# these compare exactly.
EXACT_LOW_PRECISION = (
    "bfloat16", "half", "float", "double", "to", "add", "sub", "mul", "neg", "abs", "positive", "maximum",
    "minimum", "fmax", "fmin", "max.binary", "min.binary", "clamp", "clamp_min", "clamp_max", "amax", "amin",
    "max.reduction_with_dim", "max.reduction_no_dim", "min.reduction_with_dim", "min.reduction_no_dim",
    "sign", "sgn", "floor", "ceil", "trunc", "round", "square", "nn.functional.relu", "nn.functional.relu6",
    "nn.functional.hardtanh", "where", "cat", "masked_fill", "gather", "index_select", "flip", "roll",
    "clone", "contiguous")


def tolerances(dtype, exact):
    """Per output dtype: float32 a few ulps (numpy's transcendental functions
    in Triton's interpreter against ATen's vectorized ones); bfloat16 and
    float16 two rounding steps, or none for EXACT_LOW_PRECISION; exact for
    integers and booleans."""
    if dtype in (torch.bfloat16, torch.float16):
        return {"atol": 0, "rtol": 0} if exact else {"atol": 1e-5, "rtol": 1.6e-2}
    if dtype is None or dtype.is_floating_point:
        return {"atol": 1e-5, "rtol": 1e-5}
    return {"atol": 0, "rtol": 0}


def first_samples(op, dtype, count):
    """The first `count` samples of `op` on the CPU, from a fixed seed. Made
    by the OpInfo's own sample function: `op.sample_inputs` wraps it in
    tracking for torch's test runner that inspects the stack for every
    sample (a tenth of a second each, a sizable part of this test's time)."""
    torch.manual_seed(0)
    return list(itertools.islice(op.sample_inputs_func(op, "cpu", dtype, False), count))


def _to_device(value, device):
    # Tensors are copied (to the CPU too: an in-place operator must not
    # change the sample); factories' device arguments (the "cpu" they were
    # made with) name the device too.
    if isinstance(value, torch.Tensor):
        return value.to(device, copy=True)
    if (isinstance(value, torch.device) and value.type == "cpu") or value == "cpu":
        return device
    return value


def on_device(sample, device):
    """(input, args, kwargs) of `sample`, its CPU tensors copied to `device`."""
    return pytree.tree_map(lambda v: _to_device(v, device), (sample.input, sample.args, sample.kwargs))


def _as_cpu(result):
    return pytree.tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, result)


class NothingCompiled(Exception):
    """Dynamo put no operator in a graph: the run was eager, not a test of
    torch.compile."""


def compiled_run(fn, calls):
    """`fn` on each (input, args, kwargs) of `calls`, in one torch.compile'd
    function (graph breaks allowed), results on the CPU. A fresh Dynamo each
    time: the same function is compiled again and again for other shapes,
    which would otherwise hit Dynamo's recompile limit and silently fall
    back to eager."""
    torch._dynamo.reset()

    def run_all(calls):
        return [fn(x, *args, **kwargs) for x, args, kwargs in calls]

    counter = CompileCounterWithBackend("inductor")
    results = torch.compile(run_all, backend=counter, fullgraph=False, dynamic=False)(calls)
    torch.simdev.synchronize()  # a simdev kernel's failure surfaces here
    if counter.op_count == 0:
        raise NothingCompiled("Dynamo compiled no operator (graph breaks only): the run was eager")
    return _as_cpu(results)


def _describe(error):
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    return text if len(text) < 1500 else text[:1500] + " [...]"


def _max_difference(actual, expected):
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)
            and actual.shape == expected.shape and actual.numel()):
        return "-"
    a, e = actual.double(), expected.double()
    both = torch.isfinite(a) & torch.isfinite(e)
    return f"{(a - e)[both].abs().max().item():.3g}" if both.any() else "-"


def mismatch(actual, expected, exact):
    """None when `actual` equals `expected` (output by output, each with its
    dtype's tolerances, NaN equal to NaN), else what differs."""
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    if actual_spec != expected_spec:
        return f"other outputs: {actual_spec} where eager has {expected_spec}"
    for index, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
        dtype = e.dtype if isinstance(e, torch.Tensor) else None
        try:
            torch.testing.assert_close(a, e, equal_nan=True, **tolerances(dtype, exact))
        except AssertionError as error:
            return f"output {index}: max difference {_max_difference(a, e)}: {_describe(error)}"
    return None


@dataclass
class Verdict:
    defects: list   # messages: simdev fails or disagrees where the compiled CPU passes
    cpu_too: list   # messages: the compiled CPU fails or disagrees the same way


def _try(fn, calls, expected, exact):
    """(results, problem): problem None when it ran and matched `expected`."""
    try:
        results = compiled_run(fn, calls)
    except NothingCompiled:
        raise
    except Exception as error:  # noqa: BLE001 - any failure is the finding
        return None, f"fails: {_describe(error)}"
    problem = mismatch(results, expected, exact)
    return results, (f"disagrees with eager CPU, {problem}" if problem else None)


def _eager(fn, sample):
    x, args, kwargs = on_device(sample, "cpu")
    return fn(x, *args, **kwargs)


# In eval mode, native_batch_norm's saved statistics depend on the device by
# design: empty on the CPU, the running statistics elsewhere (CUDA's
# convention, which Inductor's decomposition follows for every device but
# the CPU: torch/_decomp/decompositions.py, native_batch_norm_helper).
EVAL_STATISTICS = ("native_batch_norm", "_native_batch_norm_legit")


def _without_eval_statistics(fn):
    def batch_norm(x, *args, **kwargs):
        out = fn(x, *args, **kwargs)
        training = next(a for a in args if isinstance(a, bool))
        return out if training else out[0]
    return batch_norm


def judge(op, dtype, samples, fn=None):
    """Run `samples` of `op` (or of `fn`, a variant of it) compiled on
    simdev; what went wrong, if anything."""
    fn = fn or op.op
    if op.full_name in EVAL_STATISTICS:
        fn = _without_eval_statistics(fn)
    exact = op.full_name in EXACT_LOW_PRECISION
    expected = [_eager(fn, s) for s in samples]
    _, problem = _try(fn, [on_device(s, DEVICE) for s in samples], expected, exact)
    if problem is None:
        return Verdict([], [])
    alone = [(s, e, _try(fn, [on_device(s, DEVICE)], [e], exact)) for s, e in zip(samples, expected)]
    failing = [(s, e, r, p) for s, e, (r, p) in alone if p is not None]
    what = f"{op.full_name} {str(dtype).removeprefix('torch.')}"
    if not failing:  # each sample passes alone: the graph of all of them is what fails
        return Verdict([f"{what}, all {len(samples)} samples in one graph: simdev {problem}"], [])
    verdict = Verdict([], [])
    for sample, e, simdev_result, simdev_problem in failing:
        where = f"{what} {sample.summary()}"
        cpu_result, cpu_problem = _try(fn, [on_device(sample, "cpu")], [e], exact)
        if cpu_problem is None:
            verdict.defects.append(f"{where}\n    simdev {simdev_problem}\n    (the compiled CPU passes)")
        elif cpu_result is None:
            verdict.cpu_too.append(f"{where}: the compiled CPU {cpu_problem}")
        elif simdev_result is not None and mismatch(simdev_result, cpu_result, exact) is None:
            verdict.cpu_too.append(f"{where}: the compiled CPU {cpu_problem}, and simdev agrees with it")
        else:
            verdict.defects.append(f"{where}\n    simdev {simdev_problem}\n    the compiled CPU {cpu_problem}"
                                   " (differently)")
    return verdict


def check(op, dtype, fn=None, samples=None):
    """The test of one case: fails naming every simdev defect, skips when
    only what the compiled CPU does too went wrong."""
    if samples is None:
        samples = first_samples(op, dtype, SAMPLES.get(dtype, OTHER_SAMPLES))
    if not samples:
        pytest.skip(f"the OpInfo of {op.full_name} has no {dtype} sample")
    try:
        verdict = judge(op, dtype, samples, fn)
    except NothingCompiled as error:
        pytest.skip(f"{op.full_name} {dtype}: {error}")
    if verdict.defects:
        pytest.fail("simdev fails where the compiled CPU passes:\n" + "\n".join(verdict.defects), pytrace=False)
    if verdict.cpu_too:
        pytest.skip("not simdev's: " + "; ".join(verdict.cpu_too))


# A test that takes longer is hung: it dumps every thread's stack and ends
# the process (faulthandler's own thread, which needs no GIL: a deadlock that
# holds it cannot stop the dump), so that CI reports where instead of
# waiting out its time. A normal case takes seconds, one whose failures are
# compiled on the CPU too under a minute.
HUNG_AFTER_S = 120


def watchdog(capsys):
    """Per test (an autouse fixture of the test modules). The stacks go to
    the process's own stderr, not to pytest's capture of the test's output,
    which a process that ends this way never reports."""
    with capsys.disabled():
        stderr = os.fdopen(os.dup(2), "w")
    faulthandler.dump_traceback_later(HUNG_AFTER_S, exit=True, file=stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        stderr.close()
