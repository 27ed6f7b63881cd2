"""The transformers findings: a reproducer of a bug a later release fixed says `not reproduced` on the harness's own
release and BUG REPRODUCED with the bug put back into it (what the release that fixed it changed, undone in the
reproducer's process); one of a bug the harness's release has reproduces on it; each signature explains the failure
the suites recorded and nothing beside it."""

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
    return reproduce_script(tmp_path, DENSE_MLP, bug)


def reproduce_script(tmp_path, finding, bug: str = "") -> subprocess.CompletedProcess:
    """The finding's reproducer run by the harness's Python, with `bug` as its sitecustomize."""
    (tmp_path / "sitecustomize.py").write_text(bug)
    return subprocess.run(
        [sys.executable, str(finding.reproducer)],
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


STOP_STRING = finding_named(FINDINGS, "transformers-mtp-misses-a-stop-string-completed-inside-a-pass")


def test_the_stop_string_reproducer_reproduces_on_the_harness_s_own_release(tmp_path):
    """transformers 5.25.0 (the harness's release) has the bug: no release without it is known, so no flip yet."""
    done = reproduce_script(tmp_path, STOP_STRING)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1].startswith("BUG REPRODUCED: with use_mtp=True generation ran past")


# the message of a case on transformers 5.25.0 (tiny-deepseek-v3, features), as the suite recorded it
RAN_ON = (
    "AssertionError: stop ' a n' completes at output position 1 (across-passes): expected the output to end there, got "
    "24 tokens (261, 729, 76, 263, 425, 67, 65, 829, 84, 292, 750, 73, 770, 277, 298, 310, 269, 77, 437, 277, 78, 483, "
    "89, 324); passes (VerifyStep(start=0, drafts=(), accepted=0, emitted=(261,)), VerifyStep(start=1, drafts=(729,), "
    "accepted=1, emitted=(729, 76)), VerifyStep(start=3, drafts=(263,), accepted=1, emitted=(263, 425)))"
)


def test_the_stop_string_signature_explains_a_stop_inside_a_pass_and_nothing_beside_it():
    assert STOP_STRING.explains(failed(RAN_ON))
    at_a_pass_end = RAN_ON.replace("emitted=(729, 76)", "emitted=(729,)")  # the stop's token ended its pass
    too_early = RAN_ON.replace("got 24 tokens", "got 1 tokens")
    elsewhere = RAN_ON.replace("output position 1 ", "output position 30 ")  # no pass emitted it
    for message in (at_a_pass_end, too_early, elsewhere, RECORDED, ""):
        assert not STOP_STRING.explains(failed(message)), message


RUNS_PAST_EOS = finding_named(FINDINGS, "transformers-mtp-runs-past-an-eos-inside-an-accepted-run")
EMPTY_AFTER_EOS = finding_named(FINDINGS, "transformers-mtp-emits-nothing-after-a-prompt-ending-in-eos")
# on transformers 5.15.1 (tiny-deepseek-v3), as the suites recorded them
PAST_EOS = (
    "prompt natural-01: decoder transformers-mtp, request 0: its passes break the pass contract: the passes emitted 24 "
    "tokens [268, 848, 83, 291, 268, 199, 2, 573]..., the output is 2"
)
EMPTY = {
    "index": 0,
    "actual_tokens": [],
    "steps": [{"start": 0, "drafts": [], "accepted": -1, "emitted": []}],
    "eos_token_ids": [12],
    "prompt_ids": [17, 12, 831, 12, 525, 12, 221, 20, 12, 660, 21, 12],
}


def test_the_eos_run_past_signature_explains_passes_beyond_the_output_and_nothing_beside_it():
    assert RUNS_PAST_EOS.explains(failed(PAST_EOS))
    for message in (PAST_EOS.replace("emitted 24", "emitted 2"), PAST_EOS.replace("emitted 24", "emitted 1"), RAN_ON):
        assert not RUNS_PAST_EOS.explains(failed(message)), message


def test_the_empty_output_signature_needs_the_prompt_s_eos_and_the_draftless_pass_that_took_its_token_back():
    def with_record(**changes) -> FailedCase:
        return FailedCase("suites/greedy/test_x.py::test_y[z]", "", {"divergence": {**EMPTY, **changes}}, (), None)

    assert EMPTY_AFTER_EOS.explains(with_record())
    assert not EMPTY_AFTER_EOS.explains(with_record(prompt_ids=[17, 12, 831]))  # the prompt does not end with it
    assert not EMPTY_AFTER_EOS.explains(with_record(actual_tokens=[221]))
    assert not EMPTY_AFTER_EOS.explains(with_record(index=3))
    took_none_back = [{"start": 0, "drafts": [], "accepted": 0, "emitted": []}]
    assert not EMPTY_AFTER_EOS.explains(with_record(steps=took_none_back))
    assert not EMPTY_AFTER_EOS.explains(failed(""))


def test_each_eos_reproducer_says_not_reproduced_on_the_harness_s_own_release(tmp_path):
    """5.25.0 has neither bug (both fixed by transformers, in 5.16.1 and 5.18.0; measured on those releases)."""
    for finding in (RUNS_PAST_EOS, EMPTY_AFTER_EOS):
        done = reproduce_script(tmp_path, finding)
        assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("not reproduced"), done.stderr
