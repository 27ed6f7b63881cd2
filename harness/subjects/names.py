"""Decoder names, known without importing a decoder: the door (harness/subjects/door.py) checks `--decoder`
against them in a fraction of a second, where building the registry's factories imports torch and
transformers (seconds). harness/subjects/builtin.py and harness/subjects/mutants.py define the factories under
these names; suites/unit/test_door.py checks that the lists agree. Imports nothing of the harness but its errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "mtp_harness.decoders"
MUTANT_PREFIX = "mutant:"
BUILTIN_NAMES = (
    "llamacpp",
    "llamacpp-mtp",
    "mtp",
    "target",
    "transformers-assisted",
    "transformers-mtp",
    "vllm",
    "vllm-mtp",
)
MUTANT_NAMES = (
    "accept-if-equal",
    "bf16-tail-truncation",
    "block-start-residual-from-p",
    "bonus-wrong-position",
    "commit-heads-unverified",
    "conv-restored-recurrent-kept",
    "eos-ignored",
    "fp32-tail-truncation",
    "max-tokens-overshoot",
    "no-bonus",
    "no-mtp-rollback",
    "no-target-rollback",
    "position-offset",
    "recurrent-state-not-restored",
    "recurrent-state-one-late",
    "residual-from-p",
    "shared-uniform",
    "softmax-q-for-greedy-draft",
    "stale-drafts-after-reject",
    "stale-mtp-hidden",
    "truncated-run-ends-in-a-correction",
    "truncation-commits-unverified-drafts",
    "typical-acceptance",
    "unprocessed-q",
)
# decoders registered at run time with harness.subjects.registry.register_decoder (a test file, a notebook)
REGISTERED: dict[str, Callable[..., Any]] = {}


def is_module_factory(name: str) -> bool:
    """`your.module:factory`: a decoder named by where its factory lives."""
    return ":" in name and not name.startswith(MUTANT_PREFIX)


def known_decoders() -> list[str]:
    """Every decoder name a run can use, but the module:factory form."""
    names = set(BUILTIN_NAMES) | {MUTANT_PREFIX + name for name in MUTANT_NAMES} | set(REGISTERED)
    return sorted(names | {entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)})


def unknown_decoder(name: str) -> str | None:
    """None when `name` names a decoder (or has the module:factory form, checked by importing it), else the
    error: the near matches and the known names."""
    if is_module_factory(name):
        return None
    known = known_decoders()
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"unknown decoder {name!r}.{hint} Known: {', '.join(known)}; or module:factory for your own."
