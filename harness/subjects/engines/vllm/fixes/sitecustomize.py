"""Fixes of the vLLM findings, applied inside a vLLM process when asked for, never by default.

With this directory on PYTHONPATH, Python runs this file at start-up (`sitecustomize`). It reads
MTP_HARNESS_ENGINE_FIXES (finding slugs, comma-separated; empty or unset: nothing) and, for each, installs the
fix module of that finding (<slug with - as _>.py, beside this file): the code of its write-up's Fix section
(docs/findings/<slug>.md), which patches vLLM modules the moment they are imported, before vLLM uses them.
vLLM's files are never touched. The harness
sets both variables only under `--engine-fixes` (harness/subjects/engines/vllm/decoder.py) and the
reproducer tests; a run under it says so in its report header.

This file and the fix modules run in vLLM's environment: they import nothing of the harness.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

ORDER = (  # the order fixes are applied in: the position-0 fix recompiles a forward the GLM-4.5 fix then wraps
    "vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized",
    "vllm-drafter-skipped-for-the-whole-batch-near-max-model-len",
    "vllm-mtp-zeroes-the-token-embedding-at-position-0",
    "vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state",
    "vllm-probabilistic-drafts-ignore-the-request-seed",
    "vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end",
    "vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine",
    "vllm-min-tokens-masks-the-bonus-token-by-the-committed-length",
)
APPLIED = []  # (slug, patched module) pairs, for the engine server to report


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs each fix's patch of a module right after the module is executed, whoever imports it first."""

    def __init__(self) -> None:
        # module name -> its patches, in the order of ORDER
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


def fix_module(slug: str) -> str:
    """A finding's fix lives in this directory as <slug with - as _>.py."""
    return slug.replace("-", "_")


def install(slugs: Sequence[str]) -> None:
    unknown = [slug for slug in slugs if slug not in ORDER]
    if unknown:
        raise SystemExit(f"MTP_HARNESS_ENGINE_FIXES: no fix for {unknown}; known: {', '.join(ORDER)}")
    finder = PatchOnImport()
    for slug in [slug for slug in ORDER if slug in slugs]:  # one order, whatever the variable's
        fix = importlib.import_module(fix_module(slug))
        for name, patch in fix.PATCHES.items():
            if name in sys.modules:
                patch(sys.modules[name])
            else:
                finder.patches.setdefault(name, []).append(patch)
            APPLIED.append((slug, name))
    sys.meta_path.insert(0, finder)


install([slug for slug in os.environ.get("MTP_HARNESS_ENGINE_FIXES", "").split(",") if slug])
