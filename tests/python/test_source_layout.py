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


def test_the_three_cmake_projects_find_torch_one_way():
    """devbridge, simdev and cudadev find torch through one CMake module,
    cmake/TorchFromPython.cmake; each plugin carries a byte-identical copy
    (its sdist builds alone), and none uses find_package(Torch)."""
    canonical = (ROOT / "cmake" / "TorchFromPython.cmake").read_bytes()
    for project in (ROOT, ROOT / "plugins" / "simdev", ROOT / "plugins" / "cudadev"):
        finder = project / "cmake" / "TorchFromPython.cmake"
        assert finder.read_bytes() == canonical, (
            f"{finder.relative_to(ROOT)} differs from cmake/TorchFromPython.cmake: edit the latter and copy it "
            f"over (cp cmake/TorchFromPython.cmake {finder.relative_to(ROOT)})")
        lists = (project / "CMakeLists.txt").read_text()
        assert "include(TorchFromPython)" in lists and "find_package(Torch" not in lists, project


# ---------------------------------------------------------------- C++ style (docs/design.md, "C++ style")

CPP_SUFFIXES = (".cpp", ".h", ".cu")
# A function defined at column 0 on one line: "<type> Name(" or "<type> Class::Name(".
DEFINITION = re.compile(r"^(?:[A-Za-z_][\w:<>,*& ]*?[\s*&])((?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*)\((?!\*)")
NOT_A_DEFINITION = re.compile(r"^(return|using|typedef|namespace|struct|class|enum|template|static_assert|TEST|"
                              r"TORCH_|C10_|PYBIND11_|extern|if|for|while|switch|case|else|do)\b|^(#|//|/\*| \*)")
PASCAL, CAMEL, SNAKE = r"[A-Z][A-Za-z0-9]*", r"[a-z][A-Za-z0-9]*", r"[a-z][a-z0-9_]*"


def cpp_files(*folders):
    for folder in folders:
        yield from (p for p in sorted((ROOT / folder).rglob("*")) if p.suffix in CPP_SUFFIXES)


def defined_functions(path: pathlib.Path):
    for line in path.read_text().splitlines():
        if line and not line[0].isspace() and not NOT_A_DEFINITION.match(line) and not line.rstrip().endswith(";"):
            match = DEFINITION.match(line)
            if match:
                parts = match.group(1).split("::")
                if not parts[-1].startswith("~") and not (len(parts) > 1 and parts[-2] == parts[-1]):  # ctor, dtor
                    yield parts


def style_violations(path: pathlib.Path, file_rule: str, function_ok) -> list[str]:
    problems = []
    stem = path.name.split(".")[0]
    if not (re.fullmatch(file_rule, stem) or re.fullmatch(r"test_[a-z0-9_]+", stem)):
        problems.append(f"file name {path.name!r} does not match {file_rule}")
    for parts in defined_functions(path):
        if not function_ok(parts):
            problems.append(f"function {'::'.join(parts)}")
    return problems


def devbridge_function(parts):  # Google style; C entry points and accessors named as the ABI says
    name = parts[-1]
    return re.fullmatch(PASCAL, name) or name.startswith(("devbridge_", "PyInit_")) or name in ("main", "type")


def simdev_function(parts):  # PyTorch style; ATen kernels keep their operator's name (csrc only)
    return re.fullmatch(CAMEL, parts[-1])


def simdev_csrc_function(parts):
    return re.fullmatch(CAMEL, parts[-1]) or re.fullmatch(r"_?" + SNAKE, parts[-1])


def cudadev_function(parts):  # snake_case free functions; out-of-line overrides keep c10's names
    return len(parts) > 1 or re.fullmatch(r"_?" + SNAKE, parts[-1])


STYLE_TREES = [
    (("src", "include", "tests/cpp"), r"[a-z][a-z0-9_]*", devbridge_function),
    (("plugins/simdev/runtime/src",), PASCAL, simdev_function),
    (("plugins/simdev/csrc",), PASCAL, simdev_csrc_function),
    (("tests/plugins/hostplug/csrc",), PASCAL, simdev_csrc_function),  # PyTorch's style, as simdev's backend
    (("plugins/cudadev/csrc",), r"[a-z][a-z0-9_]*", cudadev_function),
]


@pytest.mark.parametrize("folders, file_rule, function_ok", STYLE_TREES, ids=lambda v: v[0] if isinstance(v, tuple) else None)
def test_each_tree_keeps_its_cpp_style(folders, file_rule, function_ok):
    problems = [f"{path.relative_to(ROOT)}: {problem}" for path in cpp_files(*folders)
                for problem in style_violations(path, file_rule, function_ok)]
    assert not problems, "not in the tree's C++ style (docs/design.md, \"C++ style\"):\n" + "\n".join(problems)


def test_the_style_check_catches_a_breach(tmp_path):
    wrong = tmp_path / "StreamOrder.cpp"
    wrong.write_text("int DeviceRuntime::current_stream(int index) const {\n  return index;\n}\n"
                     "static void helper_function() {}\nvoid FineName(int x) {\n}\n")
    problems = style_violations(wrong, r"[a-z][a-z0-9_]*", devbridge_function)
    assert problems == ["file name 'StreamOrder.cpp' does not match [a-z][a-z0-9_]*",
                        "function DeviceRuntime::current_stream", "function helper_function"], problems
