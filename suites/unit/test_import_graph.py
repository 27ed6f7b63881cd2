"""Imports inside the harness flow one way: no module reaches itself through others, counting imports made
inside functions and by importlib.import_module (a registry that imports its registrants, which import it
back, is a cycle even when one side imports lazily)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import harness

PACKAGE = Path(harness.__file__).parent


def module_name(path: Path) -> str:
    parts = ("harness", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_import_module_call(node: ast.AST) -> bool:
    """importlib.import_module("harness.x") with a literal name."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
    )


def harness_imports(path: Path, known: set[str]) -> set[str]:
    """Every harness module `path` imports, wherever the import statement sits."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # from harness import catalogue_command
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif is_import_module_call(node):
            found.add(str(node.args[0].value))
    return (found & known) - {"harness", module_name(path)}


def test_harness_modules_import_each_other_without_cycles():
    paths = [path for path in PACKAGE.rglob("*.py") if "suites" not in path.relative_to(PACKAGE).parts]
    known = {module_name(path) for path in paths}
    graph = {module_name(path): harness_imports(path, known) for path in paths}
    assert sum(map(len, graph.values())) > 50, "the import graph came out nearly empty: the parser is wrong"
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None
