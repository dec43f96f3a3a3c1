"""The C++ tree's include rules (docs/design.md, "Source layout"), read from
the sources: every file under src/ sits in a layer, and includes only what
its layer may see. The launch core and the kernel runtimes stay free of torch
and Python (they build and run alone, under ThreadSanitizer too); the torch
side never reaches into the Python bindings; a kernel runtime never reaches
into another one."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)

# Public headers that are plain C ABIs (no torch, no Python).
TORCH_FREE_PUBLIC = {"devbridge/c_launch_api.h", "devbridge/c_runtime_api.h", "devbridge/c_graph_api.h",
                     "devbridge/error.h"}
FRAMEWORK_PREFIXES = ("ATen/", "c10/", "torch/", "pybind11/", "Python.h", "structmember.h")
OUR_LAYERS = ("launch/", "kernel_runtimes/", "graphs/", "runtime/", "dlpack/", "python/", "devbridge/")


def layer_of(path: pathlib.Path) -> str:
    parts = path.relative_to(SRC).parts
    return "/".join(parts[:2]) if parts[0] == "kernel_runtimes" else parts[0]


def includes(path: pathlib.Path) -> list[tuple[str, str]]:
    return INCLUDE.findall(path.read_text())


def is_ours(header: str) -> bool:
    return header.startswith(OUR_LAYERS)


def violations(path: pathlib.Path) -> list[str]:
    layer = layer_of(path)
    problems = []
    for _, header in includes(path):
        if layer == "launch" or layer.startswith("kernel_runtimes/"):
            if header.startswith(FRAMEWORK_PREFIXES):
                problems.append(f"{header}: the launch core and the kernel runtimes are torch-free and Python-free")
            elif header.startswith("devbridge/") and header not in TORCH_FREE_PUBLIC:
                problems.append(f"{header}: a torch-facing public header; only {sorted(TORCH_FREE_PUBLIC)} here")
            elif header.startswith(("runtime/", "dlpack/", "python/", "graphs/")):
                problems.append(f"{header}: a layer above {layer}")
            elif layer == "launch" and header.startswith("kernel_runtimes/"):
                problems.append(f"{header}: the launch core knows kernel runtimes through launch/kernel_runtimes.h")
            elif header.startswith("kernel_runtimes/") and not header.startswith(layer + "/"):
                problems.append(f"{header}: another kernel runtime")
        elif layer == "graphs":
            if header.startswith(FRAMEWORK_PREFIXES):
                problems.append(f"{header}: the graph registry is torch-free and Python-free")
            elif header.startswith("devbridge/") and header not in TORCH_FREE_PUBLIC:
                problems.append(f"{header}: a torch-facing public header; only {sorted(TORCH_FREE_PUBLIC)} here")
            elif header.startswith(("launch/", "kernel_runtimes/", "runtime/", "dlpack/", "python/")):
                problems.append(f"{header}: the graph registry stands alone (C ABI headers and graphs/ only)")
        elif layer in ("runtime", "dlpack"):
            if header.startswith(("python/", "kernel_runtimes/")):
                problems.append(f"{header}: the torch side does not include the bindings or a kernel runtime")
        elif layer == "python":
            if header.startswith("kernel_runtimes/"):
                problems.append(f"{header}: bindings reach kernel runtimes through launch/kernel_runtimes.h")
        else:
            problems.append(f"{path.relative_to(SRC)} is in no layer of docs/design.md's source layout")
            break
    return problems


SOURCES = sorted(p for p in SRC.rglob("*") if p.suffix in (".cpp", ".h", ".cu"))


def test_every_source_file_is_in_a_known_layer():
    layers = {layer_of(p) for p in SOURCES}
    assert layers <= {"launch", "graphs", "runtime", "dlpack", "python", "kernel_runtimes/cuda", "kernel_runtimes/cann",
                      "kernel_runtimes/simdev"}, layers
    assert len(SOURCES) > 40  # the glob sees the tree


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_includes_follow_the_layer_rules(path):
    assert violations(path) == []


def test_our_includes_name_files_that_exist():
    # A rule over names is only as good as the names: each quoted include of
    # ours resolves under src/ or include/.
    missing = [f"{p.relative_to(SRC)}: {h}" for p in SOURCES for kind, h in includes(p)
               if kind == '"' and is_ours(h) and not ((SRC / h).exists() or (ROOT / "include" / h).exists())]
    assert missing == []


def test_the_rules_catch_a_breach(tmp_path, monkeypatch):
    # The checker itself: a launch-core file including torch, and a kernel
    # runtime including another one, are both reported.
    fake = tmp_path / "src"
    (fake / "launch").mkdir(parents=True)
    (fake / "kernel_runtimes" / "cuda").mkdir(parents=True)
    (fake / "launch" / "bad.cpp").write_text('#include <ATen/ATen.h>\n#include "python/py_args.h"\n')
    (fake / "kernel_runtimes" / "cuda" / "bad.cpp").write_text('#include "kernel_runtimes/cann/acl_api.h"\n')
    monkeypatch.setitem(globals(), "SRC", fake)
    assert len(violations(fake / "launch" / "bad.cpp")) == 2
    assert len(violations(fake / "kernel_runtimes" / "cuda" / "bad.cpp")) == 1
