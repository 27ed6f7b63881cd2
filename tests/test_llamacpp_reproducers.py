"""Each llama.cpp finding's standalone reproducer (its folder's reproducer.py) reproduces its bug on llama.cpp as
shipped, on each GGUF fixture: it prints `BUG REPRODUCED` and exits 1; on llama.cpp built from its source with every
finding's fix (harness/subjects/engines/llamacpp/findings/<slug>/fix.patch, what --engine-fixes all runs) it prints `not
reproduced` and exits 0, so each fix flips its bug. Each reproducer's verdict is a comparison that holds on a correct
engine (the same tokens with and without speculation; the same drafts on a fresh slot and after another request; no
failed draft decode), said in its docstring. Needs llama.cpp's environment and its build with the fixes (`mtp-harness
engine install llama.cpp`, and `mtp-harness run --decoder llamacpp-mtp --engine-fixes all` builds the latter;
.ci/run does both)."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.contract.paths import FIXTURE_MODELS
from harness.subjects.engines.findings import finding_named
from harness.subjects.engines.llamacpp.build import build_spec, built_python
from harness.subjects.engines.llamacpp.environment import ENVIRONMENT as LLAMACPP
from harness.subjects.engines.llamacpp.environment import GGUF_FILE
from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS

pytestmark = [
    pytest.mark.xdist_group("llamacpp"),
    pytest.mark.skipif(
        LLAMACPP.installed_version("cpu") is None,
        reason="llama.cpp's environment is not installed: run `mtp-harness engine install llama.cpp` (.ci/run does)",
    ),
]


EVERY_FIX = build_spec(tuple(sorted(finding.slug for finding in LLAMACPP_FINDINGS)))


def reproduce(python, slug, fixture):
    script = finding_named(LLAMACPP_FINDINGS, slug).reproducer
    return subprocess.run(
        [str(python), str(script), str(FIXTURE_MODELS / fixture / GGUF_FILE)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=script.parent,
    )


@pytest.mark.parametrize("fixture", ["tiny-glm4-moe", "tiny-qwen3-next"])
@pytest.mark.parametrize("slug", [finding.slug for finding in LLAMACPP_FINDINGS])
def test_each_llamacpp_reproducer_reproduces_its_bug_as_shipped(slug, fixture):
    done = reproduce(LLAMACPP.python("cpu"), slug, fixture)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1 and lines and lines[-1].startswith("BUG REPRODUCED"), (done.returncode, lines[-5:])


@pytest.mark.skipif(built_python(EVERY_FIX) is None, reason="llama.cpp built with every finding's fix is not built")
@pytest.mark.parametrize("fixture", ["tiny-glm4-moe", "tiny-qwen3-next"])
@pytest.mark.parametrize("slug", [finding.slug for finding in LLAMACPP_FINDINGS])
def test_each_llamacpp_reproducer_finds_no_bug_on_the_build_with_the_fixes(slug, fixture):
    done = reproduce(built_python(EVERY_FIX), slug, fixture)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines and lines[-1].startswith("not reproduced"), (done.returncode, lines[-5:])
