"""Known engine findings watch exactly the tests they make fail, for the versions they were found in, and a
watched test's failure counts as the finding only when the finding's signature explains it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.decoding.mtp_decoder import MTPDecoder
from harness.subjects.engines import registry
from harness.subjects.engines.configurations import EngineConfiguration, configuration_table
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.environments import EngineEnvironment
from harness.subjects.engines.findings import Finding, known_failures, suite_relative
from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS
from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

pytest_plugins = ["pytester"]

FINDING = Finding(
    slug="x-bug",
    title="x",
    engine="x",
    decoders=("x-mtp",),
    found_in="1.0",
    flavours=("cpu",),
    failing={"*": ("greedy/test_a.py::test_b[*-k2-*]",), "model-2": ("sampling/test_c.py::*",)},
    passing={"*": ("greedy/test_a.py::test_b[p9-k2-*]",)},
    signature="the message says x-bug-symptom",
    explains=lambda case: "x-bug-symptom" in case.message,
)


def ids(nodeid, decoder="x-mtp", version="1.0", flavour="cpu", model="model-1", fixed=frozenset()):
    return [f.slug for f in known_failures([FINDING], decoder, version, flavour, model, nodeid, fixed)]


def test_a_finding_marks_the_tests_of_its_patterns_for_its_decoder_version_and_flavour():
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]") == ["x-bug"]
    assert ids("suites/greedy/test_a.py::test_b[p1-k3-final]") == []
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", version="1.1") == []
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", flavour="cuda") == []
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", decoder="x") == []


def test_a_finding_whose_fix_the_engine_runs_with_watches_nothing():
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", fixed=frozenset({"x-bug"})) == []


def test_brackets_in_test_ids_are_literal_and_listed_exceptions_pass():
    assert ids("suites/greedy/test_a.py::test_b[p9-k2-final]") == []
    assert ids("suites/greedy/test_a.py::test_bp1-k2-final]") == []


def test_a_finding_can_list_tests_that_pass_on_some_of_its_releases():
    """passing_on: the bug is in the release, but these tests (measured) do not reach it there."""
    finding = replace(
        FINDING,
        failing={"*": ("greedy/test_a.py::test_b[*]",)},
        passing={},
        passing_on={"0.9": ("greedy/test_a.py::test_b[*-k1-*]",)},
    )
    k1, k2 = "greedy/test_a.py::test_b[p1-k1-final]", "greedy/test_a.py::test_b[p1-k2-final]"
    assert (finding.fails("m", k1, "0.9"), finding.fails("m", k2, "0.9")) == (False, True)
    assert (finding.fails("m", k1, "1.0"), finding.fails("m", k1)) == (True, True)


def test_a_finding_can_fail_more_tests_on_one_model():
    assert ids("suites/sampling/test_c.py::test_d[case]", model="model-2") == ["x-bug"]
    assert ids("suites/sampling/test_c.py::test_d[case]", model="model-1") == []


def test_node_ids_are_matched_wherever_the_suites_live():
    assert suite_relative("/site-packages/suites/greedy/test_a.py::t") == "greedy/test_a.py::t"


@pytest.mark.parametrize(("findings", "engine"), [(VLLM_FINDINGS, "vLLM"), (LLAMACPP_FINDINGS, "llama.cpp")])
def test_every_finding_has_its_write_up_fix_and_reproducer(findings, engine):
    from harness.contract.paths import REPO_ROOT

    for finding in findings:
        document = REPO_ROOT / finding.document
        assert document.is_file(), f"{finding.slug}: no {finding.document}"
        assert finding.reproducer is not None and finding.fix is not None, f"{finding.slug}: its folder lacks one"
        text = document.read_text()
        assert "## Root cause" in text and f"## Reproducer ({engine} alone)" in text and finding.found_in in text
        # the releases it watches, measured by `mtp-harness matrix`, are the ones its Releases section names
        releases = text.split("## Releases", 1)[1].split("\n## ", 1)[0] if "## Releases" in text else ""
        assert f"So it watches {', '.join(finding.versions)}." in releases, (finding.slug, finding.versions)


class InstalledAt(EngineEnvironment):
    """An engine environment that says version 1.0 is installed, without looking."""

    def installed_version(self, flavour_name: str, release: str | None = None) -> str | None:
        return "1.0"


@pytest.fixture
def x_engine(monkeypatch):
    """The engine `x` with FINDING, behind the decoder name x-mtp (the harness's own decoder, in this process), for a
    pytester run in this process."""
    engine = Engine(
        environment=InstalledAt("x", (), "import x"),
        decoders={"x-mtp": True, "x": False},
        make_decoder=lambda engine, bundle, speculative, options: MTPDecoder(bundle),
        server=Path("x_server.py"),
        default_dtypes={},
        configurations=configuration_table(EngineConfiguration("default", "x as it comes")),
        findings=(FINDING,),
    )
    monkeypatch.setattr(registry, "ENGINES", (*registry.ENGINES, engine))


WATCHED_TESTS = """
import pytest
from harness.subjects.engines.process import EngineUnavailable

@pytest.fixture
def engine_that_does_not_start():
    raise EngineUnavailable("engine x-mtp-k2 did not start: x-bug-symptom in its log")

@pytest.mark.parametrize("p", ["p1-k2-known", "p1-k2-other", "p1-k2-lazy"])
def test_b(p):
    if p.endswith("lazy"):  # engines start on first use, inside the test's call
        raise EngineUnavailable("engine x-mtp-k2 did not start: x-bug-symptom in its log")
    raise AssertionError("x-bug-symptom" if p.endswith("known") else "a different bug")
"""


def watched_run(pytester, selection, *options):
    (pytester.path / "greedy").mkdir()
    (pytester.path / "greedy" / "test_a.py").write_text(WATCHED_TESTS)
    return pytester.runpytest_inprocess(
        "greedy", "--harness-decoder=x-mtp", "-p", "no:cacheprovider", "-k", selection, *options
    )


def test_a_watched_failure_the_signature_explains_is_expected_and_keeps_its_message(pytester, x_engine, tmp_path):
    result = watched_run(pytester, "known", f"--harness-report={tmp_path / 'run'}", "--harness-shrink-seconds=0")
    result.assert_outcomes(xfailed=1)
    import json

    [case] = json.loads((tmp_path / "run" / "results.json").read_text())["cases"]
    assert case["outcome"] == "xfailed" and "x-bug-symptom" in case["message"], "the failure itself is kept"
    assert case["known"]["findings"] == ["x-bug"]
    [group] = json.loads((tmp_path / "run" / "results.json").read_text())["known"]
    assert group["finding"] == "x-bug" and group["count"] == 1


def test_a_watched_failure_outside_the_signature_fails_the_run_naming_the_test_and_the_finding(pytester, x_engine):
    result = watched_run(pytester, "other")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*not explained by x-bug: its signature is the message says*"])
    result.stdout.fnmatch_lines(["FAILED greedy/test_a.py::test_b[[]p1-k2-other[]]*"])


def test_a_watched_test_that_passes_fails_as_a_strict_xpass(pytester, x_engine):
    (pytester.path / "greedy").mkdir()
    (pytester.path / "greedy" / "test_a.py").write_text(
        "import pytest\n@pytest.mark.parametrize('p', ['p1-k2-final'])\ndef test_b(p):\n    pass\n"
    )
    result = pytester.runpytest_inprocess("greedy", "--harness-decoder=x-mtp", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*XPASS(strict)*watched by x-bug*"])


def test_a_watched_test_that_passes_with_part_of_its_check_not_judged_is_no_xpass(pytester, x_engine):
    """Under --reference engine a check that needs weights (draft conformance) does not run: the test's pass says
    nothing of the bug its finding shows through that check."""
    (pytester.path / "greedy").mkdir()
    (pytester.path / "greedy" / "test_a.py").write_text(
        "import pytest\n"
        "from harness.contract.records import UnjudgedRecord, attach_record\n"
        "@pytest.mark.parametrize('p', ['p1-k2-final'])\n"
        "def test_b(p, record_property):\n"
        "    attach_record(record_property, 'unjudged', UnjudgedRecord(checks=['draft conformance'], why='no weights'))\n"
    )
    result = pytester.runpytest_inprocess("greedy", "--harness-decoder=x-mtp", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_an_engine_that_does_not_start_is_never_taken_for_a_finding(pytester, x_engine):
    (pytester.path / "greedy").mkdir()
    (pytester.path / "greedy" / "test_a.py").write_text(
        WATCHED_TESTS.replace("def test_b(p):", "def test_b(p, engine_that_does_not_start):")
    )
    result = pytester.runpytest_inprocess("greedy", "--harness-decoder=x-mtp", "-p", "no:cacheprovider", "-k", "known")
    result.assert_outcomes(errors=1)  # a set-up error, though its message carries the symptom


def test_an_engine_started_in_the_test_that_does_not_start_is_a_failure_though_its_log_shows_the_symptom(
    pytester, x_engine
):
    result = watched_run(pytester, "lazy")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not explained by x-bug: an engine that did not start or stopped answering*"])


def test_the_vllm_signatures_refuse_a_start_up_failure_and_an_unrelated_crash():
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    drafts_of_token_zero = signature_module(
        VLLM_FINDINGS, "vllm-drafter-skipped-for-the-whole-batch-near-max-model-len"
    ).drafts_of_token_zero
    sampled_with_garbage_parameters = signature_module(
        VLLM_FINDINGS, "vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized"
    ).sampled_with_garbage_parameters

    def case(message, records=None):
        return FailedCase("n", message, records or {}, (), model=lambda: pytest.fail("no model needed"))

    start_up = "EngineError: engine vllm-mtp-tiny-mimo-k2-greedy did not start: RuntimeError: out of memory"
    assert not sampled_with_garbage_parameters(case(start_up))
    assert not sampled_with_garbage_parameters(case("EngineError: engine died: Segmentation fault"))
    crash = "EngineError: RuntimeError: index -874454752 is out of bounds for dimension 1 with size 1024"
    assert sampled_with_garbage_parameters(case(crash))
    assert not drafts_of_token_zero(case(start_up))


def test_the_cpu_generator_signature_explains_the_offset_error_and_no_other_engine_error():
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    cpu_generator_asked_for_its_offset = signature_module(
        VLLM_FINDINGS, "vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine"
    ).cpu_generator_asked_for_its_offset

    def case(message):
        return FailedCase("n", message, {}, (), model=lambda: pytest.fail("no model needed"))

    died = (  # as the 2026-12-05 features run reported it (harness/subjects/engines/process.py, EngineProcess.call)
        "harness.subjects.engines.process.EngineError: engine vllm-mtp-tiny-mimo-k2-sample-v1 failed decode call 1: "
        "RuntimeError: CPU Generator does not use offset\nTraceback (most recent call last):\n"
        '  File ".../vllm/v1/worker/gpu_model_runner.py", line 3502, in _bookkeeping_sync\n'
    )
    assert cpu_generator_asked_for_its_offset(case(died))
    unrelated = "EngineError: engine vllm-mtp-tiny-mimo-k2-sample-v1 failed decode call 1: RuntimeError: CUDA error"
    assert not cpu_generator_asked_for_its_offset(case(unrelated))
    assert not cpu_generator_asked_for_its_offset(case("AssertionError: the samples do not follow the law"))


def test_the_min_tokens_signature_explains_an_eos_masked_at_a_bonus_position_and_no_near_miss():
    """The record the features suite attached (tiny-mimo, natural-01, 2026-12-05): R's token 79 at 8 made an EOS with
    min_tokens 8, and the pass starting at 5 accepted its 3 drafts and put its bonus, 293, where the EOS belonged.
    Near misses it must not explain: the divergence at a draft or correction position, a pass that started at
    min_tokens (its committed length allowed the EOS), an EOS still masked there, a non-EOS token, an EOS too early."""
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    eos_masked_at_a_bonus_position = signature_module(
        VLLM_FINDINGS, "vllm-min-tokens-masks-the-bonus-token-by-the-committed-length"
    ).eos_masked_at_a_bonus_position

    expected = [310, 313, 70, 299, 310, 268, 559, 199, 79]
    actual = [310, 313, 70, 299, 310, 268, 559, 199, 293, 436, 14, 221, 474, 268, 394, 432, 425, 261, 394, 419]
    steps = [
        {"start": 0, "drafts": [], "accepted": 0, "emitted": [310]},
        {"start": 1, "drafts": [313, 70, 299], "accepted": 3, "emitted": [313, 70, 299, 310]},
        {"start": 5, "drafts": [268, 559, 199], "accepted": 3, "emitted": [268, 559, 199, 293]},
        {"start": 9, "drafts": [436, 989, 761], "accepted": 1, "emitted": [436, 14]},
        {"start": 11, "drafts": [221, 474, 268], "accepted": 3, "emitted": [221, 474, 268, 394]},
        {"start": 15, "drafts": [432, 425, 374], "accepted": 2, "emitted": [432, 425, 261]},
        {"start": 18, "drafts": [394, 12, 384], "accepted": 1, "emitted": [394, 419]},
    ]
    forced = {"0": 310, "1": 313, "2": 70, "3": 299, "4": 14, "5": 268, "6": 559, "7": 199, "8": 79}
    test = "suites/features/test_feature_greedy.py::test_greedy_output_under_the_feature"

    def explained(min_tokens=8, eos=(0, 79), expected=expected, actual=actual, steps=steps) -> bool:
        record = {
            "settings": "min-tokens-at-the-eos",
            "min_tokens": min_tokens,
            "eos_token_ids": list(eos),
            "stop_sequences": [],
            "forced_drafts": forced,
            "expected": expected,
            "actual": actual,
            "finish_reason": "length",
            "expected_finish_reason": "eos",
            "steps": steps,
        }
        nodeid = f"{test}[min-tokens-at-the-eos-accept-4-reject-1-k3-natural-01]"
        case = FailedCase(nodeid, "DIVERGENCE at generated index 8", {"feature_output": record}, (), lambda: None)
        return eos_masked_at_a_bonus_position(case)

    assert explained()
    assert explained(min_tokens=6), "a pass that started below min_tokens masks its bonus past min_tokens too"
    assert not explained(min_tokens=5), "the pass started at min_tokens: its committed length allowed the EOS"
    assert not explained(min_tokens=9), "the EOS is still masked at 8: the target-only output cannot end there"
    assert not explained(eos=(0,)), "the target-only token at 8 is not an EOS"
    drafted_to_9 = {"start": 5, "drafts": [268, 559, 199, 293], "accepted": 4, "emitted": [268, 559, 199, 293, 436]}
    assert not explained(steps=[*steps[:2], drafted_to_9]), "position 8 is an accepted draft (k = 4)"
    corrected = {"start": 6, "drafts": [559, 199, 5], "accepted": 2, "emitted": [559, 199, 293]}
    one = {"start": 5, "drafts": [], "accepted": 0, "emitted": [268]}
    assert not explained(steps=[*steps[:2], one, corrected]), "position 8 corrects a rejected draft: not the bonus"
    undrafted = [*steps[:2], *({"start": i, "drafts": [], "accepted": 0, "emitted": [actual[i]]} for i in range(5, 9))]
    assert not explained(steps=undrafted), "a pass without drafts masks by its own position"
    assert not explained(actual=expected), "the outputs agree (a failure by finish reason, say)"
    assert not explained(actual=[*expected[:6], 79]), "an EOS emitted too early, where the target-only output goes on"
    assert not explained(expected=[*expected[:6], 12, 199, 79]), "a divergence before the EOS"
    no_record = FailedCase(f"{test}[x]", "DIVERGENCE", {}, (), lambda: None)
    assert not eos_masked_at_a_bonus_position(no_record)


def test_the_drafter_skip_signature_needs_the_predicted_token_zero_passes_and_unchanged_tokens():
    """A record it must explain: the pass after a step whose longest sequence leaves no room for k drafts holds
    token 0 only. Near misses it must not: token-0 drafts after a step that fits (a new bug that drafts 0), a
    predicted pass with a real draft (the drafter ran), a record without the engine's steps, a changed token."""
    from harness.models.loading import bundle_for
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    drafts_of_token_zero = signature_module(
        VLLM_FINDINGS, "vllm-drafter-skipped-for-the-whole-batch-near-max-model-len"
    ).drafts_of_token_zero

    bundle = bundle_for("tiny-mimo", "cpu", "float32")
    fits, full = bundle.max_context - 2, bundle.max_context - 1  # + k = 2: at the limit (the drafter runs), past it

    def passes(drafts, longest, forced=None, other=None):
        steps = [{"start": 1, "drafts": [5, 6], "accepted": 2, "emitted": [5, 6, 7]}]
        steps.append({"start": 4, "drafts": drafts, "accepted": 0, "emitted": [9]})
        record = {
            "prompt_id": "p",
            "num_draft_tokens": 2,
            "forced_drafts": forced or {},
            "expected": None,
            "steps": steps,
            "other_steps": None,
            "other": None,
        }
        if longest is not None:
            record["step_facts"] = {"longest": [longest, 10]}
        if other is not None:
            record |= {"other_steps": other[0], "other": "alone", "other_step_facts": {"longest": other[1]}}
        return {"passes": record}

    forced_test = "greedy/test_forced_rejections.py::test_forced_rejections_keep_the_reference"

    def explained(records):
        case = FailedCase(f"{forced_test}[p-k2-final-position-mixed]", "passes differ", records, (), lambda: bundle)
        return drafts_of_token_zero(case)

    assert explained(passes([0, 0], full))
    assert explained(passes([0], full)), "the scheduler trims the zeros at max_model_len"
    assert not explained(passes([0, 0], fits)), "the step left room for k drafts: the drafter ran"
    assert not explained(passes([4, 0], full)), "a predicted skip whose pass holds a real draft: the drafter ran"
    assert not explained(passes([0, 0], None)), "without the engine's steps nothing is predicted"
    assert not explained(passes([0, 0], fits, forced={"4": 0, "5": 0})), "drafts of 0 that were forced"
    assert not explained(passes([3, 4], fits)), "no skip predicted or seen: another bug"
    alone = [{"start": 1, "drafts": [0, 0], "accepted": 0, "emitted": [2]}]
    assert not explained(passes([0, 0], full, other=(alone, [fits]))), "the decode alone drafted 0 unpredicted"
    drafted_alone = [
        {"start": 1, "drafts": [5, 6], "accepted": 2, "emitted": [5, 6, 7]},
        {"start": 4, "drafts": [9], "accepted": 1, "emitted": [9]},
    ]
    assert explained(passes([0, 0], full, other=(drafted_alone, [9, 9])))
    divergence = {"divergence": {"near_tie": False, "index": 3}}
    assert not explained(passes([0, 0], full) | divergence), "the skip never changes greedy tokens"

    # the skip where predicted, and one unrelated defect beside it: each refused (the signature before issue 62
    # explained every one of them, judging the predicted passes only)
    def with_first_pass(record, **change):
        record["passes"]["steps"][0] |= change
        return record

    assert not explained(with_first_pass(passes([0, 0], full), accepted=0)), "pass 0 rejected the token it emitted"
    assert not explained(passes([0, 0], full, forced={"2": 4})), "a forced draft that is not the forced token"
    planned = passes([0, 0], full)
    planned["passes"]["expected"] = [[1, 2], [3, 1]]
    assert not explained(planned), "the passes before the skip are not the plan's"
    under_accepting_alone = [dict(drafted_alone[0], accepted=1), drafted_alone[1]]
    assert not explained(passes([0, 0], full, other=(under_accepting_alone, [9, 9]))), "alone, a draft rejected"
    other_plan = [dict(drafted_alone[0], emitted=[5, 6]), drafted_alone[1]]
    assert not explained(passes([0, 0], full, other=(other_plan, [9, 9]))), "the two decodes part before the skip"


def test_the_expand_kernel_signature_needs_a_rejection_that_spares_the_first_token():
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    sampled_with_garbage_parameters = signature_module(
        VLLM_FINDINGS, "vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized"
    ).sampled_with_garbage_parameters

    def pit(rejected, first_ks_holm, first_z_holm=1.0):
        positions = [
            {"position": t, "ks_holm": 1.0 if t else first_ks_holm, "z_holm": 1.0 if t else first_z_holm}
            for t in range(3)
        ]
        positions[2] = {"position": 2, "ks_holm": 0.0, "z_holm": 0.0}  # the garbage temperature acts here
        record = {"kind": "pit", "rejected": rejected, "family_alpha": 1e-3, "positions": positions}
        return FailedCase("n", "rejected", {"sampling": record}, (), model=lambda: None)

    assert sampled_with_garbage_parameters(pit(True, first_ks_holm=0.5))
    assert not sampled_with_garbage_parameters(pit(True, first_ks_holm=1e-9)), "the plain sampler's token is off"
    assert not sampled_with_garbage_parameters(pit(True, 0.5, first_z_holm=1e-9)), "the first token's likelihood"
    assert not sampled_with_garbage_parameters(pit(False, 0.5)), "a case that was not rejected failed otherwise"
    law = {"kind": "law", "rejected": True, "tv": 0.05}
    assert sampled_with_garbage_parameters(FailedCase("n", "rejected", {"sampling": law}, (), model=lambda: None))


def test_the_drafter_skip_explains_draft_mismatches_from_its_first_predicted_skip_on():
    """A request's mismatches at and after the pass the engine steps predict as skipped are the skip's (the zeros,
    then drafts from an MTP cache with holes); a mismatch before it, or after token-0 drafts no step predicts (the
    longest sequence of their step fits: a new bug), is not."""
    from harness.models.loading import bundle_for
    from harness.subjects.engines.findings import FailedCase
    from harness.subjects.engines.vllm.signatures import DRAFTER_SKIP, conformance_explained_by

    bundle = bundle_for("tiny-mimo", "cpu", "float32")
    steps = [
        {"start": 0, "drafts": [7, 8], "accepted": 2, "emitted": [7, 8, 9]},
        {"start": 3, "drafts": [0, 0], "accepted": 0, "emitted": [4]},  # the skipped pass
        {"start": 4, "drafts": [5, 6], "accepted": 0, "emitted": [1]},  # drafts from a cache with holes
    ]
    test = "suites/invariants/test_draft_conformance.py::test_greedy_drafts_equal_the_harness_proposers"

    def explained(longest: list[int] | None, mismatch_starts=(3, 4)) -> frozenset[str]:
        request = {"prompt_id": "p", "prompt_ids": [3, 4, 5], "token_ids": [7, 8, 9, 4, 1], "steps": steps}
        if longest is not None:
            request["step_facts"] = {"longest": longest}
        by_start = {s["start"]: s["drafts"] for s in steps}
        mismatches = [{"request": 0, "start": s, "drafts": by_start[s], "expected": [1, 2]} for s in mismatch_starts]
        record = {"num_draft_tokens": 2, "passes": 3, "mismatches": mismatches, "requests": [request]}
        case = FailedCase(f"{test}[k2-mixed]", "mismatch", {"conformance": record}, (DRAFTER_SKIP,), lambda: bundle)
        return conformance_explained_by(case)

    full, fits = bundle.max_context - 1, bundle.max_context - 2
    assert explained([full, 6, 7]) == {DRAFTER_SKIP}
    assert explained([fits, 6, 7]) == frozenset(), "the step fits: token-0 drafts nobody predicts"
    assert explained(None) == frozenset(), "without the engine's steps nothing is predicted"
    assert explained([full, 6, 7], mismatch_starts=(0, 3, 4)) == frozenset(), "a mismatch before the skip"


def test_under_reference_engine_a_signature_reads_the_models_card_not_its_weights():
    """A signature that asks for the model (`FailedCase.model`, e.g. the drafter skip's max_context) gets the model the
    session holds: under --reference engine its card, whose config it reads without opening the weights (before, the
    bundle's load raised WeightFileOpened and the failure was left unexplained)."""
    from types import SimpleNamespace

    from harness.contract.run_options import Reference, RunOptions
    from harness.models.card import ModelCard
    from harness.plugin.known import model_under_test
    from harness.plugin.session import RUN_OPTIONS

    for reference, has_weights in ((Reference.ENGINE, False), (Reference.HARNESS, True)):
        config = SimpleNamespace(
            stash={RUN_OPTIONS: RunOptions(model="tiny-mimo", device="cpu", dtype="float32", reference=reference)}
        )
        model = model_under_test(config)
        assert model.has_weights is has_weights and isinstance(model, ModelCard) is not has_weights
        assert model.max_context == 256


def test_the_hybrid_signatures_explain_their_engine_errors_and_no_other():
    """The two CPU hybrid findings (tiny-qwen3-next-hd64): each explains its own error, as the engine's traceback
    reached the test (2026-12-07 runs), and neither the other's nor an unrelated crash."""
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    align = signature_module(
        VLLM_FINDINGS, "vllm-cpu-hybrid-mtp-with-prefix-caching-calls-a-triton-kernel"
    ).mamba_align_kernel_called_without_triton
    conv = signature_module(
        VLLM_FINDINGS, "vllm-cpu-gdn-mtp-step-shorter-than-the-accepted-run-breaks-the-conv-state"
    ).conv_state_rolled_past_its_buffer

    def case(message):
        return FailedCase("n", message, {}, (), model=lambda: pytest.fail("no model needed"))

    precopy = (
        '  File ".../vllm/v1/worker/mamba_utils.py", line 1226, in run_fused_precopy\n'
        "    precopy_mamba_align_fused_kernel[grid](\nTypeError: 'function' object is not subscriptable"
    )
    native = "RuntimeError: causal_conv1d_update_cpu: num_accepted_tokens must be in [1, seqlen]."
    fallback = (
        '  File ".../vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py", line 556, in _spec_forward\n'
        "    B.copy_(new_B)\nRuntimeError: The size of tensor a (4) must match the size of tensor b (3) at "
        "non-singleton dimension 1"
    )
    assert align(case(precopy)) and not align(case(native)) and not align(case(fallback))
    assert conv(case(native)) and conv(case(fallback)) and not conv(case(precopy))
    unrelated = "TypeError: 'function' object is not subscriptable in some_other_kernel[grid]"
    other_size = "RuntimeError: The size of tensor a (4) must match the size of tensor b (3) in rotary_embedding"
    assert not align(case(unrelated)) and not conv(case(other_size))


def test_the_gdn_conv_signature_explains_a_divergence_after_a_short_pass_and_no_other():
    """Its silent form, as V2 showed it on tiny-qwen3-next-hd64 (long-02, k = 2, 2026-12-07): every draft rejected,
    the pass at 7 cut to one draft at the context end, the divergence at 8. Not explained: the same divergence with
    no short pass before it, a near-tie, an output cut short (no token where the reference has one)."""
    from harness.subjects.engines.findings import FailedCase, signature_module
    from harness.subjects.engines.vllm.findings import FINDINGS as VLLM_FINDINGS

    explains = signature_module(
        VLLM_FINDINGS, "vllm-cpu-gdn-mtp-step-shorter-than-the-accepted-run-breaks-the-conv-state"
    ).conv_state_rolled_past_its_buffer

    def step(start, drafts):
        return {"start": start, "drafts": [5] * drafts, "accepted": 0, "emitted": [7]}

    def case(steps, **changes):
        record = {"index": 8, "num_draft_tokens": 2, "actual_token": 449, "near_tie": False, "steps": steps}
        return FailedCase("n", "DIVERGENCE at generated index 8", {"divergence": {**record, **changes}}, (), None)

    short = [step(0, 0), *(step(s, 2) for s in range(1, 7)), step(7, 1), step(8, 0)]
    full = [step(0, 0), *(step(s, 2) for s in range(1, 9))]
    assert explains(case(short))
    assert not explains(case(full))
    assert not explains(case(short, near_tie=True))
    assert not explains(case(short, actual_token=None))
    assert not explains(case([step(0, 0), *(step(s, 2) for s in range(1, 8)), step(8, 1)]))  # short at the divergence
