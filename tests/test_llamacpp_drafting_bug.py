"""A drafting bug that changes drafts and no token fails the suites on llama.cpp as shipped, and no finding explains it.

tests/data/llamacpp-mutant-first-accept-keeps-the-stale-state.patch, built into llama.cpp's source with the
harness's instrumentation (`--engine-patch`), skips moving the MTP drafter's kept state (`pending_h`) on a task's first
accept: where the first verified pass rejected a draft, the next pass drafts from the hidden state of a rejected
draft, once per task. Verification is untouched, so every greedy token stays the target's. It moves a few percent of
the passes' drafts, the size of the stale-hidden-state finding's own (which the signature up to 2026-12-03 took for
that finding's: it explained any conformance failure with mismatches in at most a quarter of the passes). That
finding's signature now predicts every pass's drafts from the pairings the build reports, so this bug's passes, which
no reported pairing gives, stay failures. Needs the mutant's build (`mtp-harness engine install llama.cpp --build
--patch tests/data/llamacpp-mutant-first-accept-keeps-the-stale-state.patch`; .ci/run builds it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.subjects.engines.llamacpp.build import build_spec, built_python

MUTANT = Path(__file__).parent / "data" / "llamacpp-mutant-first-accept-keeps-the-stale-state.patch"

pytestmark = [
    pytest.mark.xdist_group("llamacpp"),
    pytest.mark.skipif(
        built_python(build_spec(user=[MUTANT])) is None,
        reason=f"the build with the mutant is not built: mtp-harness engine install llama.cpp --build --patch {MUTANT}",
    ),
]


def test_a_drafting_bug_that_keeps_every_token_fails_the_suites_as_shipped_unexplained(tmp_path):
    selection = "(draft_conformance and k2) or (test_natural_drafts_reproduce_the_reference and k2 and natural-0)"
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy,invariants"]
    command += ["--decoder", "llamacpp-mtp", "--model", "tiny-glm4-moe", "-n", "0", "--report-dir", str(tmp_path)]
    command += ["--engine-patch", str(MUTANT), "--", "-k", selection]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    [results] = [json.loads(path.read_text()) for path in tmp_path.glob("*/results.json")]
    assert [p["role"] for p in results["run"]["engine_build"]["build"]["patches"]] == ["instrumentation", "user"]
    outcomes = {case["case"].split("::")[-1]: case["outcome"] for case in results["cases"]}
    greedy = {name: outcome for name, outcome in outcomes.items() if "natural_drafts" in name}
    assert greedy and set(greedy.values()) == {"passed"}, f"the bug must keep every token: {greedy}"
    assert done.returncode == 1, f"the drafting bug was not caught:\n{done.stdout[-3000:]}"
    clear = outcomes["test_greedy_drafts_equal_the_harness_proposers[k2-clear-of-context-end]"]
    assert clear == "failed", "the stale-hidden-state signature took the drafting bug for its own"
    failed = [case for case in results["cases"] if case["outcome"] == "failed"]
    assert all("draft_conformance" in case["nodeid"] and "known" not in case for case in failed)
