"""Failure triage end to end on three greedy mutants and an invariant one: the report opens with few groups
(one per cause, not one per failing case), each group's smallest case shrinks to a minimal one (a batch of
one, the smallest k that fails, at most two forced drafts), and its reproducer script fails on the mutant
and passes on the correct decoder."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from harness.contract.invocation import suites_pytest
from harness.contract.paths import SUITES_DIR

# Each mutant with the slice of its suite that catches it: the failure is the same in every case of a slice, so
# a correct triage shows one to three causes however many cases fail. Forced rejections (k = 1, every
# schedule) for the mutant a rejection exposes; EOS and max_new_tokens cases for the stop-rule mutants; the
# invariant suite's batched cases at k = 2 for a cache mutant.
# one torch thread per child process: the tests run beside other pytest-xdist workers (oversubscribed OpenMP
# threads made a 20-second run take minutes)
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
MUTANTS = {
    "commit-heads-unverified": ("greedy", "natural-01 and (natural_drafts or forced_rejections and k1)"),
    "eos-ignored": ("greedy", "eos_inside or eos_as_the_bonus"),
    "max-tokens-overshoot": ("greedy", "max_new_tokens"),
    "no-target-rollback": ("invariants", "batch and k2"),
}


# one xdist group per mutant: its three tests share one run of the suite (on one worker)
@pytest.fixture(scope="module", params=[pytest.param(m, marks=pytest.mark.xdist_group(f"triage-{m}")) for m in MUTANTS])
def triaged(request, tmp_path_factory):
    mutant = request.param
    suite, selection = MUTANTS[mutant]
    report = tmp_path_factory.mktemp(mutant)
    command = [*suites_pytest([SUITES_DIR / suite], cache=False), "-m", suite, "-k", selection, "-q"]
    command += [f"--harness-decoder=mutant:{mutant}", f"--harness-report={report}", "--harness-shrink-seconds=90"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=ONE_THREAD)
    assert done.returncode == 1, f"the {suite} suite did not catch mutant:{mutant}:\n{done.stdout[-2000:]}"
    return mutant, report, json.loads((report / "results.json").read_text())


def test_failures_come_as_a_few_groups_not_a_flat_list(triaged):
    mutant, _, results = triaged
    failing = [case for case in results["cases"] if case["outcome"] == "failed"]
    groups = results["groups"]
    assert sum(group["count"] for group in groups) == len(failing)
    causes = [group for group in groups if not (group["minimal"] or {}).get("same_as_group")]
    assert 1 <= len(causes) <= 3, f"mutant:{mutant}: {len(causes)} causes for {len(failing)} failures: {groups}"
    assert "<h2>Failure groups (" in (triaged[1] / "index.html").read_text()


def test_each_group_shrinks_to_a_minimal_case(triaged):
    mutant, _, results = triaged
    for group in results["groups"]:
        minimal = group["minimal"]
        assert minimal and minimal["reproduced"] and minimal["finished"], f"mutant:{mutant}, group {group}"
        assert (triaged[1] / group["reproducer"]).is_file()
        case = minimal["minimal"]
        assert minimal["batch_size"] == 1 and len(case["forced_positions"]) <= 2
        assert case["num_draft_tokens"] <= minimal["original"]["num_draft_tokens"]
        assert minimal["divergence_index"] is not None or minimal["violation"]
        assert "<svg" in (triaged[1] / "index.html").read_text().split('id="groups"')[1].split("</section>")[0]


def test_the_largest_groups_reproducer_fails_on_the_mutant_and_passes_on_the_correct_decoder(triaged):
    mutant, report, results = triaged
    for group in results["groups"][:1]:  # every group has one (test above); running each costs two processes
        script = report / group["reproducer"]
        on_mutant = subprocess.run(
            [sys.executable, script], capture_output=True, text=True, timeout=300, env=ONE_THREAD
        )
        assert on_mutant.returncode == 1
        assert "first divergence at generated index" in on_mutant.stdout or "invariant violations" in on_mutant.stdout
        assert on_mutant.stdout.strip().splitlines()[-1] == "BUG REPRODUCED"
        on_correct = subprocess.run(
            [sys.executable, script, "--decoder", "mtp"], capture_output=True, text=True, timeout=300, env=ONE_THREAD
        )
        assert on_correct.returncode == 0, f"mutant:{mutant}: {on_correct.stdout}{on_correct.stderr[-2000:]}"
        assert on_correct.stdout.strip().splitlines()[-1] == "not reproduced"


def test_the_largest_groups_rerun_command_fails_on_the_mutant_and_passes_on_the_correct_decoder(triaged):
    mutant, _, results = triaged
    command = shlex.split(results["groups"][0]["rerun"])
    assert command[0] == "python" and f"--harness-decoder=mutant:{mutant}" in command
    command[0] = sys.executable
    on_mutant = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ONE_THREAD)
    assert on_mutant.returncode == 1, on_mutant.stdout[-2000:]
    correct = [
        ("--harness-decoder=mtp" if argument.startswith("--harness-decoder=") else argument) for argument in command
    ]
    on_correct = subprocess.run(correct, capture_output=True, text=True, timeout=300, env=ONE_THREAD)
    assert on_correct.returncode == 0, f"mutant:{mutant}: {on_correct.stdout[-2000:]}"
