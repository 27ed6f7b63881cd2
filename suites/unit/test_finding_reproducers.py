"""Each vLLM finding's standalone reproducer (docs/findings/<slug>.py) flips with the finding's fix: it prints
`BUG REPRODUCED` and exits 1 on vLLM as shipped, and prints `not reproduced` and exits 0 with the fix applied
inside the vLLM process by the mechanism --engine-fixes uses (harness/subjects/engines/vllm/fixes/, through
PYTHONPATH; vLLM's files untouched). A write-up's Fix section is the fix module's code, verbatim.
Needs the vLLM environment (`mtp-harness engine install vllm`; .ci/run installs it)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from harness.contract.paths import REPO_ROOT
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM
from harness.subjects.engines.vllm.environment import FIXES
from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

pytestmark = [
    pytest.mark.skipif(REPO_ROOT is None, reason="the reproducers live in the clone's docs/findings/"),
]
needs_vllm = pytest.mark.skipif(
    VLLM.installed_version("cpu") is None,
    reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
)
SLUGS = [finding.slug for finding in VLLM_FINDINGS]


def run_reproducer(slug: str, fixed: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if fixed:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXES), os.environ.get("PYTHONPATH")]))
        env["MTP_HARNESS_ENGINE_FIXES"] = slug
    script = REPO_ROOT / "docs" / "findings" / f"{slug}.py"
    return subprocess.run(
        [str(VLLM.python("cpu")), str(script)], capture_output=True, text=True, timeout=900, env=env, cwd=script.parent
    )


@needs_vllm
@pytest.mark.xdist_group("reproducers")
@pytest.mark.parametrize("fixed", [False, True], ids=["as-shipped", "with-its-fix"])
@pytest.mark.parametrize("slug", SLUGS)
def test_the_reproducer_says_reproduced_as_shipped_and_not_with_the_fix(slug, fixed):
    done = run_reproducer(slug, fixed)
    verdicts = re.findall(r"^(BUG REPRODUCED|not reproduced)$", done.stdout, re.MULTILINE)
    context = f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if fixed:
        assert (verdicts, done.returncode) == (["not reproduced"], 0), context
    else:
        assert (verdicts, done.returncode) == (["BUG REPRODUCED"], 1), context


@pytest.mark.parametrize("finding", VLLM_FINDINGS, ids=SLUGS)
def test_the_write_up_fix_section_is_the_fix_module(finding):
    fix_file = FIXES / f"{finding.slug.replace('-', '_')}.py"  # fixes/sitecustomize.py fix_module
    write_up = (REPO_ROOT / finding.document).read_text()
    fix = write_up.split("## Fix", 1)[-1]
    blocks = re.findall(r"```python\n(.*?)```", fix, re.DOTALL)
    assert fix_file.read_text() in blocks, f"{finding.document}: its Fix section does not hold {fix_file.name}"
