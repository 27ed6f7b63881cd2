"""Imports inside the harness flow one way.

Between subpackages: each may import only the subpackages below it in LAYERS (and itself); the pytest side
(harness.plugin) and the command line (harness.commands) sit on top, side by side, and neither imports the
other. The public facade harness.api and harness.testing are for users: no harness module imports harness.api,
and only the pytest side imports harness.testing.

Inside everything: no module reaches itself through others, counting imports made inside functions and by
importlib.import_module (a registry that imports its registrants, which import it back, is a cycle even when
one side imports lazily).
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import harness

PACKAGE = Path(harness.__file__).parent

# lowest first; a subpackage may import those before it
LAYERS = (
    "contract",
    "models",
    "decoding",
    "stats",
    "checks",
    "triage",
    "subjects",
    "door",  # a run's options checked before any test runs
    "mutation",
    "report",
    "plugin",  # the pytest side: plugin, recorder, progress (and harness.testing)
    "commands",
)
SIDE_BY_SIDE = {frozenset({"plugin", "commands"})}  # the top two do not import each other
FACADES = {"harness.api": LAYERS.index("decoding"), "harness.testing": LAYERS.index("contract")}
IMPORTERS_OF_TESTING = {"plugin"}


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
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # from harness.report import charts
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif is_import_module_call(node):
            found.add(str(node.args[0].value))
    return (found & known) - {"harness", module_name(path)}


def import_graph() -> dict[str, set[str]]:
    paths = [path for path in PACKAGE.rglob("*.py") if "suites" not in path.relative_to(PACKAGE).parts]
    known = {module_name(path) for path in paths}
    return {module_name(path): harness_imports(path, known) for path in paths}


def subpackage(module: str) -> str:
    """harness.models.loading -> models; a top-level module (harness.api) is its own name."""
    return module.split(".")[1] if module.count(".") >= 1 else module


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports against the order of LAYERS, into a facade, or between the top two."""
    found = []
    for module, imports in sorted(graph.items()):
        if module == "harness":
            continue
        home = subpackage(module)
        for imported in sorted(imports):
            target = subpackage(imported)
            if imported == "harness.api":
                found.append(f"{module} imports the public facade harness.api (import what it re-exports instead)")
            elif imported == "harness.testing" and home not in IMPORTERS_OF_TESTING:
                found.append(f"{module} imports harness.testing (only the pytest side may)")
            elif module in FACADES:
                if target in LAYERS and LAYERS.index(target) > FACADES[module]:
                    found.append(f"{module} imports {imported}, above what it may re-export")
            elif home not in LAYERS:
                found.append(f"{module} is in no subpackage of LAYERS")
            elif target in LAYERS and home != target:
                if frozenset({home, target}) in SIDE_BY_SIDE:
                    found.append(f"{module} imports {imported}: {home} and {target} sit side by side")
                elif LAYERS.index(target) > LAYERS.index(home):
                    found.append(f"{module} ({home}) imports {imported} ({target}), a subpackage above it")
    return found


def test_harness_modules_import_each_other_without_cycles():
    graph = import_graph()
    assert sum(map(len, graph.values())) > 50, "the import graph came out nearly empty: the parser is wrong"
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None


def test_subpackages_import_only_the_subpackages_below_them():
    graph = import_graph()
    assert {subpackage(m) for m in graph if m.count(".") >= 1} - {"api", "testing"} == set(LAYERS), (
        "LAYERS names every subpackage of harness"
    )
    assert layer_violations(graph) == []


@pytest.mark.parametrize(
    ("module", "imported", "complaint"),
    [
        ("harness.models.loading", "harness.plugin.fixtures", "a subpackage above it"),
        ("harness.commands.cli", "harness.plugin.recorder", "side by side"),
        ("harness.report.render", "harness.api", "public facade"),
        ("harness.subjects.mutant_decoders", "harness.testing", "only the pytest side"),
    ],
)
def test_the_layer_rule_names_an_import_against_the_order(module, imported, complaint):
    [violation] = layer_violations({module: {imported}})
    assert complaint in violation and module in violation


ENGINES = "harness.subjects.engines"
ENGINE_REGISTRY = f"{ENGINES}.registry"


def engine_package(module: str) -> str | None:
    """harness.subjects.engines.vllm.decoder -> vllm; None outside an engine's package."""
    parts = module.split(".")
    engine = parts[3] if len(parts) > 3 and module.startswith(ENGINES + ".") else None
    init = PACKAGE / "subjects" / "engines" / str(engine) / "__init__.py"
    return engine if engine is not None and init.is_file() and "ENGINE = Engine(" in init.read_text() else None


def engine_violations(graph: dict[str, set[str]]) -> list[str]:
    """An engine's package imports the shared engine modules and nothing of another engine's package nor the engine
    registry (which imports each engine's record); the shared modules import no engine's package."""
    found = []
    for module, imports in sorted(graph.items()):
        home = engine_package(module)
        for imported in sorted(imports):
            target = engine_package(imported)
            if home is not None and imported == ENGINE_REGISTRY:
                found.append(f"{module} imports the engine registry (the registry reads the engines, not back)")
            elif target is not None and target != home and module != ENGINE_REGISTRY:
                where = f"engine {home}" if home else "a shared module"
                found.append(f"{module} ({where}) imports {imported}, of the engine {target}")
    return found


def test_an_engines_package_is_its_own_room():
    graph = import_graph()
    assert {engine_package(m) for m in graph} >= {"vllm", "llamacpp"}
    assert engine_violations(graph) == []
    assert engine_violations({f"{ENGINES}.vllm.findings": {f"{ENGINES}.llamacpp.signatures"}})
    assert engine_violations({f"{ENGINES}.process": {f"{ENGINES}.vllm.server"}})
    assert engine_violations({f"{ENGINES}.vllm.decoder": {ENGINE_REGISTRY}})


def test_every_subpackage_says_what_it_holds_and_what_it_may_import():
    nested = sorted(path.parent.relative_to(PACKAGE).as_posix() for path in PACKAGE.glob("*/*/__init__.py"))
    nested += sorted(path.parent.relative_to(PACKAGE).as_posix() for path in PACKAGE.glob("*/*/*/__init__.py"))
    assert "subjects/engines" in nested and "subjects/engines/vllm" in nested
    for name in [*LAYERS, *nested]:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        assert "Imports:" in doc or name == "plugin", f"harness/{name}/__init__.py: no 'Imports:' line"
        assert len(doc.split()) >= 25, f"harness/{name}/__init__.py: its docstring does not say what lives there"
