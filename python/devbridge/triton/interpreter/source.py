"""The Python function the interpreter Triton target runs: exactly the source Triton
compiled, rewritten for Triton's interpreter.

A JITFunction's source can differ from its Python function's: code generators
and Triton's own test helpers replace it after decoration
(`JITFunction._unsafe_update_src`), and the front end compiles `jit_fn.src`.
Rewriting the Python function (what InterpretedFunction does, from
inspect.getsourcelines) would run the original text instead, so the text is
taken from the JITFunction and compiled here.

The rewrite is Triton's interpreter's own AST pass (assignments become
`interpreter_semantic.to_tensor(value, False)`), executed in a namespace that
is the function's globals plus its closure's variables plus
`interpreter_semantic`: a kernel defined inside a function sees the names it
closed over, as the front end does (JITCallable.get_capture_scope).

The Triton names it uses (FunctionRewriter.ast_transformer,
interpreter_semantic, JITFunction's src / raw_src / starting_line_number /
fn) are listed, with the versions checked, in _triton_api.
"""

from __future__ import annotations

import ast
import hashlib
import threading

from . import _triton_api

_lock = threading.Lock()
_ATTRIBUTE = "_devbridge_rewritten"  # on the JITFunction: a _Rewritten cache


class _Rewritten(dict):
    """{source sha256: rewritten function}, cached on a JITFunction. It pickles
    (and copies) empty: its functions are exec'd here, named like the kernel's
    own Python function (module.qualname), which pickle, storing functions by
    reference, finds to be another object. Inductor pickles JITFunctions (the
    statically launched CachingAutotuners of its FX graph cache), so a graph
    whose kernels had run before was not cached ("Can't pickle <function triton_...>:
    it's not the same object as torch._inductor.runtime.compile_tasks....").
    A loaded JITFunction rewrites its source again when first run."""

    def __reduce__(self):
        return (_Rewritten, ())


def _first_line(jit_fn) -> int:
    """The file line of the `def` (decorators come before it), for tracebacks."""
    start = getattr(jit_fn, "starting_line_number", 1)
    for index, line in enumerate(getattr(jit_fn, "raw_src", ()) or ()):
        if line.strip().startswith("def "):
            return start + index
    return start


def _namespace(python_fn) -> dict:
    namespace = dict(python_fn.__globals__)
    if python_fn.__closure__:
        for name, cell in zip(python_fn.__code__.co_freevars, python_fn.__closure__):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:  # a cell not filled yet: the front end could not have read it either
                pass
    namespace["interpreter_semantic"] = _triton_api.interpreter().interpreter_semantic
    return namespace


def rewritten(jit_fn, source: str | None = None, *, fresh: bool = False):
    """The interpreter-ready function of `source` (default: jit_fn.src), with
    jit_fn's globals and closure as they are now. Cached on jit_fn by source
    (a helper is rewritten once, not at every call); `fresh` rewrites anew,
    for a kernel being loaded (its namespace is a copy, taken when it loads)."""
    if source is None:
        source = jit_fn.src
    key = hashlib.sha256(source.encode()).hexdigest()
    with _lock:
        cache = jit_fn.__dict__.setdefault(_ATTRIBUTE, _Rewritten())
        fn = None if fresh else cache.get(key)
    if fn is not None:
        return fn
    python_fn = jit_fn.fn
    tree = ast.parse(source)
    definitions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if len(tree.body) != 1 or len(definitions) != 1:
        raise ValueError(f"devbridge: the source of the Triton function {python_fn.__qualname__} is not one "
                         "`def` (what JITFunction._unsafe_update_src must be given)")
    tree = _triton_api.interpreter().FunctionRewriter.ast_transformer.visit(tree)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, _first_line(jit_fn) - 1)
    code = compile(tree, filename=python_fn.__code__.co_filename, mode="exec")
    namespace = _namespace(python_fn)
    local = {}
    exec(code, namespace, local)  # noqa: S102 - the kernel's own source, as Triton's interpreter does
    fn = local[definitions[0].name]
    with _lock:
        cache[key] = fn
    return fn
