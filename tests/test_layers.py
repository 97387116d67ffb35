"""The layers of docs/architecture.md ("Who may import whom"): every import of one part of the
package by another is one the table there allows.

Every import statement counts, wherever it is written: at module level, and inside functions
and methods (a deferred import is a dependency all the same, only a later one); `import X`,
`from X import Y` and relative imports alike.  What does not count: imports under
`if TYPE_CHECKING:` (never run), and modules named by a string (`importlib.import_module`,
which only the command line's dispatcher uses, for its own modules).
"""
from __future__ import annotations

import ast
import pathlib

import ptlrpc_conformance

PACKAGE = pathlib.Path(ptlrpc_conformance.__file__).parent
NAME = "ptlrpc_conformance"

# part -> the parts it may import (the table of docs/architecture.md; every part may import
# itself and the package's own __init__, which holds only the version)
ALLOWED: dict[str, set[str]] = {
    "cli": {"harness", "transport", "data", "verdicts", "ost", "outputs", "tools"},
    "plugin": {"fixtures", "harness", "transport", "data", "verdicts", "outputs"},
    "suites": {"fixtures", "transport", "data", "verdicts", "ost", "outputs", "spec"},
    "fixtures": {"harness", "transport", "data", "verdicts", "ost", "spec"},
    "harness": {"transport", "data", "ost", "capture"},
    "tools": {"harness", "transport", "data", "verdicts", "ost", "outputs", "capture", "mutants", "spec"},
    "outputs": {"harness", "transport", "data", "verdicts", "ost", "spec"},
    "ost": {"transport", "data", "verdicts", "capture", "spec"},
    "verdicts": {"transport", "data", "spec"},
    "transport": {"data", "capture", "spec", "reference"},
    "data": {"spec"},
    "capture": {"spec"},
    "mutants": {"reference", "spec"},
    "reference": {"spec"},
    "spec": set(),
    "vectors": set(),
}
# The reference is an IUT: of the harness, only the adapter loader reaches it, when it builds an
# adapter for it (inside the function, never at module level), and the echo testee, a testee
# program of its own.
REFERENCE_FROM_TRANSPORT = {"ptlrpc_conformance.harness.transport.loader": "function",
                            "ptlrpc_conformance.harness.transport.echo_testee": "module"}
# The LNet engine (transport/lnet_engine/) is the ground the lnet-tcp adapter and `serve` stand
# on: of the package it reads only the wire facts (spec) and the capture's NID helpers, never an
# adapter, the reference or anything above it.
ENGINE = "ptlrpc_conformance.harness.transport.lnet_engine"
ENGINE_MAY_IMPORT = {"capture", "spec"}
# The suite's own structure walker is not the reference's: the reference reads the layout table
# itself (reference/structs.py).
SUITE_ONLY = {"ptlrpc_conformance.spec.structs"}


def part(module: str) -> str | None:
    """The part of the table a module belongs to (None: the package's __init__)."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    if parts[0] == "__main__":
        return "cli"
    if parts[0] == "harness":
        if len(parts) > 1 and (PACKAGE / "harness" / parts[1]).is_dir():
            return parts[1]
        return "harness"       # options, settings and runstate at harness/'s top
    return parts[0]


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        names = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = names[-1] == "__init__"
        out[".".join(names[:-1] if is_package else names)] = (path, is_package)
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:`."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def imports(modules) -> list[tuple[str, str, int, bool]]:
    """(importer, imported package module, line, at module level) for every import."""
    found = []
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_only(tree)
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    here = here[:len(here) - (node.level - 1)]
                    base = ".".join(here + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                if t == NAME or t.startswith(NAME + "."):
                    found.append((module, t, node.lineno, id(node) in top))
    return found


def violations(modules) -> list[str]:
    out = []
    for importer, imported, line, module_level in imports(modules):
        a, b = part(importer), part(imported)
        path = modules[importer][0]
        path = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path
        where = f"{path}:{line}: {importer} imports {imported}"
        in_engine = [m == ENGINE or m.startswith(ENGINE + ".") for m in (importer, imported)]
        if in_engine[0] and not in_engine[1] and b not in ENGINE_MAY_IMPORT:
            out.append(f"{where}: the LNet engine imports only {sorted(ENGINE_MAY_IMPORT)} and itself")
        if b is None or a == b:
            continue
        if b not in ALLOWED[a]:
            out.append(f"{where}: {a} may not import {b}")
        elif b == "reference" and a == "transport":
            allowed = REFERENCE_FROM_TRANSPORT.get(importer)
            if allowed is None or (allowed == "function" and module_level):
                out.append(f"{where}: only the loader (inside the function that builds the adapter) and the "
                           "echo testee reach the reference")
        if imported in SUITE_ONLY and a in ("reference", "mutants"):
            out.append(f"{where}: the reference does not use the suite's own walker")
    return out


def test_every_part_is_in_the_table():
    assert {part(m) for m in _modules()} - {None} == set(ALLOWED)


def test_imports_follow_the_table():
    assert violations(_modules()) == []


def test_the_table_has_no_cycle():
    seen: dict[str, int] = {}

    def visit(p: str, path: tuple[str, ...]) -> None:
        assert p not in path, " -> ".join(path + (p,))
        if seen.get(p):
            return
        for q in ALLOWED[p]:
            visit(q, path + (p,))
        seen[p] = 1

    for p in ALLOWED:
        visit(p, ())


def test_the_check_sees_a_deferred_import(tmp_path):
    """A function-level import that breaks the table is found, as a module-level one is."""
    pkg = tmp_path / NAME
    (pkg / "harness" / "data").mkdir(parents=True)
    (pkg / "harness" / "outputs").mkdir(parents=True)
    for d in (pkg, pkg / "harness", pkg / "harness" / "data", pkg / "harness" / "outputs"):
        (d / "__init__.py").write_text("")
    (pkg / "harness" / "outputs" / "gate.py").write_text("X = 1\n")
    (pkg / "harness" / "data" / "bad.py").write_text(
        "def f():\n    from ptlrpc_conformance.harness.outputs import gate\n    return gate\n")
    modules = {}
    for path in pkg.rglob("*.py"):
        names = list(path.relative_to(tmp_path).with_suffix("").parts)
        is_package = names[-1] == "__init__"
        modules[".".join(names[:-1] if is_package else names)] = (path, is_package)
    found = [(i, t, top) for i, t, _, top in imports(modules)]
    assert ("ptlrpc_conformance.harness.data.bad", "ptlrpc_conformance.harness.outputs.gate", False) in found
    assert part("ptlrpc_conformance.harness.data.bad") == "data" and "outputs" not in ALLOWED["data"]


def test_the_check_holds_the_lnet_engine_to_its_row(tmp_path):
    """The engine importing an adapter of transport/ (or the reference) is a violation, though
    transport may import both."""
    pkg = tmp_path / NAME
    engine = pkg / "harness" / "transport" / "lnet_engine"
    engine.mkdir(parents=True)
    for d in (pkg, pkg / "harness", pkg / "harness" / "transport", engine):
        (d / "__init__.py").write_text("")
    (pkg / "harness" / "transport" / "adapter.py").write_text("X = 1\n")
    (engine / "node.py").write_text("from ptlrpc_conformance.harness.transport import adapter\n")
    (engine / "wire.py").write_text("from ptlrpc_conformance.harness.transport.lnet_engine import node\n")
    modules = {}
    for path in pkg.rglob("*.py"):
        names = list(path.relative_to(tmp_path).with_suffix("").parts)
        is_package = names[-1] == "__init__"
        modules[".".join(names[:-1] if is_package else names)] = (path, is_package)
    found = violations(modules)
    assert len(found) == 1 and "lnet_engine.node imports ptlrpc_conformance.harness.transport.adapter" in found[0]


def test_the_docs_state_the_table():
    """docs/architecture.md's table says what ALLOWED says."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.split("## Who may import whom", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and cells[0] != "`part`":
            rows[cells[0].strip("`")] = {c.strip().strip("`") for c in cells[1].split(",")
                                         if c.strip() not in ("", "nothing")}
    assert rows == ALLOWED
