"""Each llama.cpp finding's standalone reproducer (docs/findings/<slug>.py) reproduces its bug on llama.cpp as
shipped, on each GGUF fixture: it prints `BUG REPRODUCED` and exits 1. llama.cpp is compiled into its wheel, so no
fix can be applied inside its process to see the reproducer flip; each reproducer's verdict is a comparison that
holds on a correct engine (the same tokens with and without speculation; the same drafts on a fresh slot and after
another request), said in its docstring. Needs llama.cpp's environment (`mtp-harness engine install llama.cpp`;
.ci/run installs it)."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.contract.paths import FIXTURE_MODELS, REPO_ROOT
from harness.subjects.engines.llamacpp.environment import ENVIRONMENT as LLAMACPP
from harness.subjects.engines.llamacpp.environment import GGUF_FILE
from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS

pytestmark = [
    pytest.mark.xdist_group("llamacpp"),
    pytest.mark.skipif(REPO_ROOT is None, reason="the reproducers live in the clone's docs/findings/"),
    pytest.mark.skipif(
        LLAMACPP.installed_version("cpu") is None,
        reason="llama.cpp's environment is not installed: run `mtp-harness engine install llama.cpp` (.ci/run does)",
    ),
]


@pytest.mark.parametrize("fixture", ["tiny-glm4-moe", "tiny-qwen3-next"])
@pytest.mark.parametrize("slug", [finding.slug for finding in LLAMACPP_FINDINGS])
def test_each_llamacpp_reproducer_reproduces_its_bug_as_shipped(slug, fixture):
    script = REPO_ROOT / "docs" / "findings" / f"{slug}.py"
    done = subprocess.run(
        [str(LLAMACPP.python("cpu")), str(script), str(FIXTURE_MODELS / fixture / GGUF_FILE)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=script.parent,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1 and lines and lines[-1].startswith("BUG REPRODUCED"), (done.returncode, lines[-5:])
