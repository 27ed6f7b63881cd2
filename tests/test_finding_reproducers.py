"""Each vLLM finding's standalone reproducer (its folder's reproducer.py) flips with the finding's fix: it prints
`BUG REPRODUCED` and exits 1 on vLLM as shipped, and prints `not reproduced` and exits 0 with the fix applied
inside the vLLM process by the mechanism --engine-fixes uses (harness/subjects/engines/vllm/findings/, through
PYTHONPATH; vLLM's files untouched). A write-up's Fix section is the fix module's code, verbatim.

On both of vLLM's model runners (the reproducer's --runner): on a runner the finding's record names (its `runners`,
where its signature watches) the reproducer must say `BUG REPRODUCED` as shipped and `not reproduced` with the fix;
on a runner it does not name, `not reproduced` as shipped, so the record cannot claim a runner the bug is not on,
nor leave out one it is on.
Needs the vLLM environment (`mtp-harness engine install vllm`; .ci/run installs it)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from harness.contract.paths import REPO_ROOT
from harness.subjects.engines import vllm
from harness.subjects.engines.abilities import FixesOnImport
from harness.subjects.engines.findings import Finding
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM
from harness.subjects.engines.vllm.environment import RUNNERS
from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

pytestmark = [
    pytest.mark.skipif(REPO_ROOT is None, reason="the write-ups live in the clone's docs/findings/"),
]
needs_vllm = pytest.mark.skipif(
    VLLM.installed_version("cpu") is None,
    reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
)
SLUGS = [finding.slug for finding in VLLM_FINDINGS]


def run_reproducer(finding: Finding, runner: str, fixed: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if fixed:  # as --engine-fixes puts it into the engine's process
        env.update(vllm.ENGINE.ability(FixesOnImport).process_environment([finding.slug]))
    script = finding.reproducer
    assert script is not None, f"{finding.slug}: no reproducer.py in its folder"
    return subprocess.run(
        [str(VLLM.python("cpu")), str(script), "--runner", runner],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=script.parent,
    )


# (finding, runner, fixed): as shipped on both runners; with the fix where the record says the bug is
RUNS = [
    pytest.param(finding, runner, fixed, id=f"{finding.slug}-{runner}-{'with-its-fix' if fixed else 'as-shipped'}")
    for finding in VLLM_FINDINGS
    for runner in RUNNERS
    for fixed in (False, True)
    if not fixed or runner in finding.runners
]


def test_every_finding_names_the_runners_it_was_shown_on():
    for finding in VLLM_FINDINGS:
        assert finding.runners and set(finding.runners) <= set(RUNNERS), finding.slug


@needs_vllm
@pytest.mark.xdist_group("reproducers")
@pytest.mark.parametrize(("finding", "runner", "fixed"), RUNS)
def test_the_reproducer_says_reproduced_where_its_record_says_and_not_with_the_fix(finding, runner, fixed):
    done = run_reproducer(finding, runner, fixed)
    verdicts = re.findall(r"^(BUG REPRODUCED|not reproduced)$", done.stdout, re.MULTILINE)
    context = f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert f"model runner: {runner}" in done.stdout, context
    if runner in finding.runners and not fixed:
        assert (verdicts, done.returncode) == (["BUG REPRODUCED"], 1), context
    else:
        assert (verdicts, done.returncode) == (["not reproduced"], 0), context


@pytest.mark.parametrize("finding", VLLM_FINDINGS, ids=SLUGS)
def test_the_write_up_fix_section_is_the_fix_module(finding):
    fix_file = finding.fix
    assert fix_file is not None and fix_file.name == "fix.py", f"{finding.slug}: no fix.py in its folder"
    write_up = (REPO_ROOT / finding.document).read_text()
    fix = write_up.split("## Fix", 1)[-1]
    blocks = re.findall(r"```python\n(.*?)```", fix, re.DOTALL)
    assert fix_file.read_text() in blocks, f"{finding.document}: its Fix section does not hold {fix_file.name}"
