"""What the test-only sitecustomize.py files share (tests/broken_vllm, unforced_v2_hook, vllm_drafts_unnormed):
a change made to a module the moment it is imported, in processes a test starts with that directory on PYTHONPATH,
without touching the module's file. Standard library only: each sitecustomize loads this file by its path (a
PYTHONPATH entry of its own, so the harness is not importable there)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs `patch(module)` right after the module named `name` executes."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        load = spec.loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            load(module)
            self.patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def patch_on_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    sys.meta_path.insert(0, PatchOnImport(name, patch))
