"""Failure triage on a vLLM subject: a broken vLLM (tests/broken_vllm: its greedy verification kernel
commits every draft unverified, installed at import through PYTHONPATH, vLLM's files untouched) fails the
greedy suite; the report groups the failures, shrinks them through the engine to a minimal case, and hands
over a reproducer that uses vLLM alone (no harness import). The script and the group's re-run command fail
on the broken vLLM and pass on vLLM as shipped; a reproducer with forced drafts forces them in vLLM's own
verification. Needs the vLLM environment (`mtp-harness engine install vllm`; .ci/run installs it)."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM
from harness.subjects.engines.vllm.group_reproducer import vllm_reproducer_script

pytestmark = [
    pytest.mark.xdist_group("vllm"),
    pytest.mark.skipif(
        VLLM.installed_version("cpu") is None,
        reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
    ),
]
BROKEN_VLLM = Path(__file__).parent / "broken_vllm"
SHIPPED = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
BROKEN = {**SHIPPED, "PYTHONPATH": os.pathsep.join(filter(None, [str(BROKEN_VLLM), os.environ.get("PYTHONPATH")]))}


def run(command, env, cwd=None):
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def triaged(tmp_path_factory):
    """The greedy suite's natural-01 k = 1 cases against the broken vLLM (tiny-mimo), with the report."""
    work = tmp_path_factory.mktemp("vllm-triage")
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy", "--decoder", "vllm-mtp"]
    command += ["--model", "tiny-mimo", "-n", "0", "--report-dir", str(work), "--", "-k", "natural-01 and k1"]
    done = run(command, BROKEN, cwd=work)
    assert done.returncode == 1, f"the greedy suite did not catch the broken vLLM:\n{done.stdout[-3000:]}"
    [report] = [path.parent for path in work.glob("*/results.json")]
    return report, json.loads((report / "results.json").read_text())


def test_the_broken_vllms_failures_shrink_through_the_engine_to_a_minimal_case(triaged):
    report, results = triaged
    failing = [case for case in results["cases"] if case["outcome"] == "failed"]
    groups = results["groups"]
    assert len(failing) >= 5 and sum(group["count"] for group in groups) == len(failing)
    assert 1 <= len([g for g in groups if not g["minimal"].get("same_as_group")]) <= 2, groups
    for group in groups:
        minimal = group["minimal"]
        assert minimal["reproduced"] and minimal["finished"] and minimal["batch_size"] == 1, group
        assert minimal["minimal"]["num_draft_tokens"] == 1 and len(minimal["minimal"]["forced_positions"]) <= 2
        assert minimal["server_config"]["num_draft_tokens"] == 1
    page = (report / "index.html").read_text()
    assert f"{VLLM.python('cpu')} {groups[0]['reproducer']}" in page and "uses vllm alone" in page


def test_the_reproducer_uses_vllm_alone_and_fails_on_the_broken_vllm_only(triaged):
    report, results = triaged
    script = report / results["groups"][0]["reproducer"]
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(script.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert imported == {"json", "os", "subprocess", "sys", "vllm"}
    broken = run([str(VLLM.python("cpu")), str(script)], BROKEN)
    assert broken.returncode == 1, broken.stdout + broken.stderr[-3000:]
    assert "first divergence at generated index 1" in broken.stdout
    assert broken.stdout.strip().splitlines()[-1] == "BUG REPRODUCED"
    shipped = run([str(VLLM.python("cpu")), str(script)], SHIPPED)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr[-3000:]
    assert "same tokens: the case passes on this vLLM" in shipped.stdout
    assert shipped.stdout.strip().splitlines()[-1] == "not reproduced"


def test_the_groups_rerun_command_fails_on_the_broken_vllm_only(triaged):
    _, results = triaged
    command = shlex.split(results["groups"][0]["rerun"])
    command[0] = sys.executable
    assert run(command, BROKEN).returncode == 1
    shipped = run(command, SHIPPED)
    assert shipped.returncode == 0, shipped.stdout[-3000:]


def test_a_reproducer_forces_its_drafts_in_vllms_own_verification(triaged, tmp_path):
    """The minimal case with the target's runner-up forced as the draft at output position 1: vLLM as shipped
    rejects it there (and still reproduces target-only greedy); the broken vLLM commits it."""
    _, results = triaged
    group = json.loads(json.dumps(results["groups"][0]))
    minimal = group["minimal"]
    expected = [token["id"] for token in minimal["reference_tokens"]]
    runner_up = 7 if expected[1] != 7 else 8  # any token other than the target's choice is rejected
    minimal["forced_drafts"] = {"1": runner_up}
    script = tmp_path / "forced.py"
    script.write_text(vllm_reproducer_script(group, results["run"], script.name))
    shipped = run([str(VLLM.python("cpu")), str(script)], SHIPPED)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr[-3000:]
    assert f"pass at 1: drafts [{runner_up}], vLLM verified [{expected[1]}]" in shipped.stdout
    broken = run([str(VLLM.python("cpu")), str(script)], BROKEN)
    assert broken.returncode == 1 and f"drafts [{runner_up}], vLLM verified [{runner_up}," in broken.stdout


def test_the_broken_vllm_is_caught_with_the_engine_as_its_own_reference(tmp_path):
    """--reference engine: the reference is the same broken vLLM without speculation (its greedy verification kernel
    is never called there), and the harness process reads no weight file. The command the largest failure group
    prints, run as printed (a report directory added to read it back), replays its failure under the same options,
    the engine as its own reference and the engine's own arguments included."""
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy", "--decoder", "vllm-mtp"]
    command += ["--model", "tiny-mimo", "--reference", "engine", "--engine-arg", "max_logprobs=31"]
    command += ["-n", "0", "--report-dir", str(tmp_path / "run")]
    done = run([*command, "--", "-k", "natural-01 and k1"], BROKEN, cwd=tmp_path)
    assert done.returncode == 1, f"the greedy suite did not catch the broken vLLM:\n{done.stdout[-3000:]}"
    [results] = [json.loads(path.read_text()) for path in tmp_path.glob("run/*/results.json")]
    assert results["run"]["options"]["reference"] == "engine"
    failing = [case for case in results["cases"] if case["outcome"] == "failed"]
    assert len(failing) >= 5 and all(case["divergence"] for case in failing)
    group = results["groups"][0]
    rerun = shlex.split(group["rerun"])
    replayed = run([sys.executable, *rerun[1:], f"--harness-report={tmp_path / 'replay'}"], BROKEN, cwd=tmp_path)
    assert replayed.returncode == 1, replayed.stdout[-3000:]
    again = json.loads((tmp_path / "replay" / "results.json").read_text())
    assert again["run"]["options"] == results["run"]["options"]
    [case] = again["cases"]
    original = next(c for c in results["cases"] if c["nodeid"] == group["smallest"])
    assert case["nodeid"] == original["nodeid"] and case["divergence"]["index"] == original["divergence"]["index"]
