"""The findings' fixes, installed inside an engine's Python process when asked for (--engine-fixes), never by default.

With this folder on PYTHONPATH, Python runs this file at start-up (`sitecustomize`). It reads MTP_HARNESS_ENGINE_FIXES
(the fix.py files of the findings to fix, os.pathsep-separated; empty or unset: nothing) and installs each: a fix.py
is a finding's Fix section as code, in the finding's own folder (named by its slug), whose PATCHES map a module name to
a function that patches that module the moment it is imported, before the engine uses it. A fix that must come after
another's names it in APPLY_AFTER. The engine's files are never touched. The harness sets both only under
`--engine-fixes` (an engine's FixesOnImport ability) and in the reproducer tests; a run under it says so in its report
header, from APPLIED, which the engine's server reports.

MTP_HARNESS_ENGINE_MUTANTS names, the same way, the harness's own mutants of an engine (modules of the same PATCHES
form, kept with its tests), which its tests put into the engine under test to show that the suites catch a bug no
finding explains; they go into MUTATED, never APPLIED.

It runs in the engine's environment: standard library only, nothing of the harness.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

VARIABLE = "MTP_HARNESS_ENGINE_FIXES"
MUTANTS_VARIABLE = "MTP_HARNESS_ENGINE_MUTANTS"
APPLIED: list[str] = []  # the slugs whose fix is installed, in order, for the engine server to report
MUTATED: list[str] = []  # the mutants installed (their files' stems)
PATCHED: list[tuple[str, str]] = []  # (slug, module) for each module a fix patches


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs each fix's patch of a module right after the module is executed, whoever imports it first."""

    def __init__(self) -> None:
        # module name -> its patches, in the order they are installed
        self.patches: dict[str, list[Callable[[ModuleType], None]]] = {}

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in self.patches:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        load, patches = spec.loader.exec_module, self.patches[name]

        def exec_and_patch(module: ModuleType) -> None:
            load(module)
            for patch in patches:
                patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def load_fix(path: Path) -> ModuleType:
    """A finding's fix.py, as a module of its own."""
    return load_patches(path, f"mtp_harness_fix_{path.parent.name.replace('-', '_')}", f"{VARIABLE}: no fix")


def load_patches(path: Path, name: str, missing: str) -> ModuleType:
    """The file at `path` (a fix or a mutant: its PATCHES) as module `name`; exit saying `missing` where it is not."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise SystemExit(f"{missing} at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_order(fixes: dict[str, ModuleType]) -> list[str]:
    """The slugs sorted, then each fix after those it names in APPLY_AFTER (whatever order the variable gives)."""
    ordered: list[str] = []

    def place(slug: str) -> None:
        if slug not in ordered:
            for before in getattr(fixes[slug], "APPLY_AFTER", ()):
                if before in fixes:
                    place(before)
            ordered.append(slug)

    for slug in sorted(fixes):
        place(slug)
    return ordered


def install(paths: Sequence[Path]) -> None:
    fixes = {path.parent.name: load_fix(path) for path in paths}  # by slug: the finding's folder
    finder = PatchOnImport()
    for slug in in_order(fixes):
        PATCHED.extend((slug, name) for name in register(finder, fixes[slug]))
        APPLIED.append(slug)
    sys.meta_path.insert(0, finder)


def register(finder: PatchOnImport, module: ModuleType) -> list[str]:
    """Each of the module's PATCHES applied to its module now (already imported) or as it is imported; their names."""
    for name, patch in module.PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
        else:
            finder.patches.setdefault(name, []).append(patch)
    return list(module.PATCHES)


def install_mutants(paths: Sequence[Path]) -> None:
    finder = PatchOnImport()
    for path in paths:
        register(finder, load_patches(path, f"mtp_harness_mutant_{path.stem}", f"{MUTANTS_VARIABLE}: no mutant"))
        MUTATED.append(path.stem)
    sys.meta_path.insert(0, finder)


def paths_in(variable: str) -> list[Path]:
    return [Path(path) for path in os.environ.get(variable, "").split(os.pathsep) if path]


install(paths_in(VARIABLE))
install_mutants(paths_in(MUTANTS_VARIABLE))
