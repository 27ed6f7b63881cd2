"""The transformers findings: each reproducer says `not reproduced` on the harness's own release and BUG REPRODUCED
with the bug put back into it (what the release that fixed it changed, undone in the reproducer's process), and each
signature explains the failure the suites recorded on the releases with the bug and nothing beside it."""

from __future__ import annotations

import subprocess
import sys

from harness.subjects.engines.findings import FailedCase, finding_named
from harness.subjects.engines.transformers.findings import FINDINGS

DENSE_MLP = finding_named(FINDINGS, "transformers-mtp-builds-a-dense-mlp-for-the-moe-mtp-layer")
# what 5.14.0 to 5.15.0 do: get_mtp_config keeps the target's first_k_dense_replace (5.15.1 sets it to 0)
BUG_PUT_BACK = """
from transformers import PretrainedConfig
fixed = PretrainedConfig.get_mtp_config
def get_mtp_config(self):
    config = fixed(self)
    if hasattr(config, "first_k_dense_replace"):
        config.first_k_dense_replace = self.get_text_config(decoder=True).first_k_dense_replace
    return config
PretrainedConfig.get_mtp_config = get_mtp_config
"""


def reproduce(tmp_path, bug: str = "") -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(bug)
    return subprocess.run(
        [sys.executable, str(DENSE_MLP.reproducer)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )


def test_the_dense_mlp_reproducer_flips_on_what_fixed_it(tmp_path):
    fixed = reproduce(tmp_path)
    assert fixed.returncode == 0 and fixed.stdout.splitlines()[-1].startswith("not reproduced"), fixed.stderr
    assert "MTP layer 0 is built as a mixture of experts" in fixed.stdout
    broken = reproduce(tmp_path, BUG_PUT_BACK)
    assert broken.returncode == 1, broken.stderr
    assert broken.stdout.splitlines()[-1].startswith("BUG REPRODUCED")
    assert "get_mtp_config() gives the MTP layers 1, so MTP layer 0 is built dense" in broken.stdout


# the end of a case's message on transformers 5.14.1 (tiny-deepseek-v3, greedy), as the suites recorded it
RECORDED = (
    "E           RuntimeError: The following MtpModel weights are missing from /fixtures/models/tiny-deepseek-v3 "
    "(checkpoint keys not matching the conversion mapping?): ['layers.0.mtp_block.mlp.down_proj.weight', "
    "'layers.0.mtp_block.mlp.gate_proj.weight', 'layers.0.mtp_block.mlp.up_proj.weight']\n\n"
    "harness/subjects/engines/process.py:134: EngineError"
)


def failed(message: str) -> FailedCase:
    return FailedCase("suites/greedy/test_x.py::test_y[z]", message, {}, (DENSE_MLP.slug,), lambda: None)


def test_the_dense_mlp_signature_explains_the_recorded_failure_and_nothing_beside_it():
    assert DENSE_MLP.explains(failed(RECORDED))
    attention = RECORDED.replace("mlp.down_proj", "self_attn.q_a_proj")  # another weight missing too
    experts = RECORDED.replace("mlp.down_proj", "mlp.experts.0.down_proj")
    for message in (attention, experts, RECORDED.replace("missing", "unexpected"), "RuntimeError: []", ""):
        assert not DENSE_MLP.explains(failed(message)), message
