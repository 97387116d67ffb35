"""The package's shape (docs/architecture.md): no import cycles, no private name imported
across modules, at most a dozen modules at any level of the harness, and the import paths
documented before the harness was split still work."""
from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import ptlrpc_conformance

PACKAGE = pathlib.Path(ptlrpc_conformance.__file__).parent
NAME = "ptlrpc_conformance"
MAX_MODULES_PER_LEVEL = 12


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(modules) -> tuple[dict[str, set[str]], list[str]]:
    """module -> the package modules it imports (anywhere in the file); and the private names
    imported from another module."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    private = []
    for module, (path, is_package) in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node.level, node.module)
                if not base.startswith(NAME):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        edges[module].add(sub)
                    else:
                        edges[module].add(base)
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            private.append(f"{module} imports {alias.name} from {base}")
            elif isinstance(node, ast.Import):
                edges[module] |= {a.name for a in node.names if a.name in modules}
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    edges, _ = _imports(_modules())
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_private_name_crosses_modules():
    _, private = _imports(_modules())
    assert private == []


def test_harness_levels_are_small():
    harness = PACKAGE / "harness"
    for folder in [harness] + [p for p in harness.iterdir() if p.is_dir() and (p / "__init__.py").exists()]:
        modules = [p for p in folder.iterdir()
                   if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()]
        assert len(modules) <= MAX_MODULES_PER_LEVEL, (folder, sorted(p.name for p in modules))


def test_no_compatibility_paths_of_an_unreleased_layout():
    """The package was never released with the harness unsplit: no module at harness/'s top
    re-exports a subpackage's names for code written against that layout."""
    for old in ("adapter", "vectors", "lnet"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"{NAME}.harness.{old}")
    from ptlrpc_conformance.harness.data import vector_schema
    assert not hasattr(vector_schema, "Validator")


def test_what_the_reference_imports_is_said_as_it_is():
    """The reference's codec and structures need the standard library alone; its target reads
    spec/target.yaml with PyYAML, so no document says the reference is standard library only."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from ptlrpc_conformance.reference import codec, structs\n"
            "assert 'yaml' not in sys.modules\n"
            "from ptlrpc_conformance.reference.target import Target\n"
            "from ptlrpc_conformance.reference.target_config import TargetConfig\n"
            "Target(TargetConfig())\n"
            "print('yaml' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    root = PACKAGE.parent
    said = {"docs/architecture.md": (root / "docs" / "architecture.md").read_text(encoding="utf-8"),
            "reference/testee.py": (PACKAGE / "reference" / "testee.py").read_text(encoding="utf-8")}
    for where, text in said.items():
        flat = " ".join(text.split())
        assert "node as its code reads, standard library only" not in flat, where
        assert "docs/testee-protocol.md. Standard library only." not in flat, where
        assert "PyYAML" in flat, where
