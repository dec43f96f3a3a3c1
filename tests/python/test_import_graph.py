"""devbridge's import graph, read from the source with ast: every import of a
devbridge module, at module level or inside a function (a lazy import is
still a dependency), and every importlib.import_module / sys.modules lookup
of a devbridge module named by a string.

  no cycle among the devbridge.triton modules (the Triton layer is a DAG:
  hardware, then the torch_plugin table, the policy
  registry, activate()'s stack, the driver, the package's activate())
  no upward import between the layers core < triton < inductor < check,
  beyond the ones listed in KNOWN_UPWARD (each names its reason)

`python3 tests/python/test_import_graph.py` prints the graph.
"""

from __future__ import annotations

import ast
import pathlib

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "python" / "devbridge"
EXTENSIONS = {"devbridge._C"}  # compiled modules (no .py source)

# A module belongs to the first layer whose prefix it has (so the longer
# prefixes come first); ORDER lists the layers from the lowest.
LAYERS = (("check", ("devbridge.check", "devbridge.__main__")),
          ("inductor", ("devbridge.inductor",)),
          ("triton", ("devbridge.triton",)),
          ("core", ("devbridge",)))
ORDER = ("core", "triton", "inductor", "check")

# Upward imports that exist outside the Triton layer's registry (issue #20),
# each lazy (inside a function):
KNOWN_UPWARD = {
    # devbridge.install() also arms torch.compile (devbridge.inductor.arm)
    ("devbridge", "devbridge.inductor"),
    # declare_hardware() arms torch.compile for the declared device
    ("devbridge.triton.hardware", "devbridge.inductor"),
}


def modules(root: pathlib.Path = SOURCE) -> dict[str, tuple[pathlib.Path, bool]]:
    """{module name: (path, is a package)} for every .py file under root."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        found[".".join(parts)] = (path, package)
    return found


def _deepest_known(name: str, known: set[str]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _string_target(node: ast.Call) -> str | None:
    """The devbridge module an import_module("...") / sys.modules.get("...") call names."""
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    if name not in ("import_module", "__import__", "get") or not node.args:
        return None
    if name == "get" and not (isinstance(function, ast.Attribute) and isinstance(function.value, ast.Attribute)
                              and function.value.attr == "modules"):
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("devbridge"):
        return first.value
    return None


def imports(module: str, path: pathlib.Path, package: bool, known: set[str]) -> dict[str, bool]:
    """{imported devbridge module: lazy} for one module; lazy = every import of it is inside a function."""
    edges: dict[str, bool] = {}

    def add(target: str | None, lazy: bool) -> None:
        if target is not None and target != module:
            edges[target] = edges.get(target, True) and lazy

    def targets(node) -> list[str | None]:
        if isinstance(node, ast.Import):
            return [_deepest_known(alias.name, known) for alias in node.names]
        if node.level:
            base = module.split(".") if package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if not source.startswith("devbridge"):
            return []
        # `from X import name`: the submodule X.name where there is one, else X itself
        return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else _deepest_known(source, known)
                for alias in node.names]

    def walk(node, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in targets(child):
                    add(target, inner)
            elif isinstance(child, ast.Call):
                named = _string_target(child)
                if named is not None:
                    add(_deepest_known(named, known), inner)
            walk(child, inner)

    walk(ast.parse(path.read_text(), filename=str(path)), False)
    return edges


def graph(root: pathlib.Path = SOURCE) -> dict[str, dict[str, bool]]:
    found = modules(root)
    known = set(found) | EXTENSIONS
    return {name: imports(name, path, package, known) for name, (path, package) in found.items()}


def cycles(edges: dict[str, dict[str, bool]], within: str) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan) among
    the modules named `within` or `within.*`."""
    def inside(name):
        return name == within or name.startswith(within + ".")

    nodes = [name for name in edges if inside(name)]
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, {}):
            if not inside(target):
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return found


def layer(name: str) -> str:
    for label, prefixes in LAYERS:
        if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes):
            return label
    raise ValueError(f"{name} is in no layer")


def upward(edges: dict[str, dict[str, bool]]) -> set[tuple[str, str]]:
    return {(source, target) for source, targets in edges.items() for target in targets
            if ORDER.index(layer(source)) < ORDER.index(layer(target))}


# ---------------------------------------------------------------- tests


def test_the_reader_sees_every_kind_of_import(tmp_path):
    """The reader itself: module-level, lazy, relative and string-named imports
    all become edges, and a planted cycle and upward import are reported."""
    package = tmp_path / "devbridge"
    (package / "triton").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch.py").write_text("def f():\n    from .triton import policy\n")
    (package / "triton" / "__init__.py").write_text("from . import policy\n")
    (package / "triton" / "policy.py").write_text(
        "import importlib\ndef f():\n    importlib.import_module('devbridge.triton.driver')\n")
    (package / "triton" / "driver.py").write_text("from devbridge.triton.policy import register\n")
    edges = graph(package)
    assert edges["devbridge.triton"] == {"devbridge.triton.policy": False}
    assert edges["devbridge.triton.policy"] == {"devbridge.triton.driver": True}
    assert cycles(edges, "devbridge.triton") == [["devbridge.triton.driver", "devbridge.triton.policy"]]
    assert upward(edges) == {("devbridge.launch", "devbridge.triton.policy")}


def test_the_triton_layer_has_no_import_cycle():
    edges = graph()
    assert "devbridge.triton.policy" in edges and "devbridge.triton.backend.driver" in edges
    assert cycles(edges, "devbridge.triton") == []


def test_no_layer_imports_a_higher_one_beyond_the_known_ones():
    assert upward(graph()) == KNOWN_UPWARD


def test_the_registry_and_its_tables_know_nothing_above_them():
    """The torch_plugin table imports no registry; the registry no driver and
    no package-level activation; the driver not the package that activates it."""
    edges = graph()
    assert not {"devbridge.triton.policy", "devbridge.triton"} & set(edges["devbridge.triton.torch_plugin"])
    assert not {"devbridge.triton", "devbridge.triton.backend.driver"} & set(edges["devbridge.triton.policy"])
    assert "devbridge.triton" not in edges["devbridge.triton.backend.driver"]


def test_the_core_never_imports_the_triton_layer():
    edges = graph()
    for source, targets in edges.items():
        if source.startswith("devbridge._"):
            assert not [t for t in targets if t.startswith("devbridge.triton")], source


if __name__ == "__main__":
    edges = graph()
    for source in sorted(edges):
        if edges[source]:
            targets = sorted(edges[source].items())
            print(source, "->", ", ".join(f"{t}{' (lazy)' if lazy else ''}" for t, lazy in targets))
    print("cycles in devbridge.triton:", cycles(edges, "devbridge.triton") or "none")
    print("cycles in devbridge:", cycles(edges, "devbridge") or "none")
    print("upward:", sorted(upward(edges)) or "none")
