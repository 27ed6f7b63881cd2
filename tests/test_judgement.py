"""What a run judged per suite (harness/report/judgement.py): silence is never success."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from harness.contract.run_options import EngineOptions, Reference, RunOptions, run_command
from harness.contract.suites import NOT_APPLICABLE
from harness.report.judgement import (
    FAILED,
    NOT_APPLICABLE_VERDICT,
    NOT_JUDGED,
    NOT_JUDGED_EXIT,
    OK,
    TOO_FEW,
    beneath_command,
    judge,
    judge_run,
    judgement_text,
    run_verdict,
    skip_reason,
)

pytest_plugins = ["pytester"]

EXPAND = {"findings": ["vllm-cpu-expand-kernel"], "explanation": "the CPU expand kernel"}


def case(suite: str, outcome: str, message: str = "", known: dict | None = None) -> dict:
    record = {"nodeid": f"suites/{suite}/test_a.py::t", "suite": suite, "outcome": outcome, "message": message}
    return record | ({"known": known} if known else {})


def header(options: RunOptions) -> dict:
    return {"options": options.to_record(), "command": "python -m pytest ..."}


def test_a_suite_is_failed_not_judged_or_ok_by_what_it_judged():
    cases = [
        case("greedy", "passed"),
        case("greedy", "near-tie"),
        case("greedy", "xfailed", known=EXPAND),
        case("greedy", "skipped", "no CUDA device"),
        case("sampling", "xfailed", known=EXPAND),
        case("sampling", "xfailed", known=EXPAND),
        case("engine", "skipped", "no such configuration"),
        case("invariants", "error"),
        case("invariants", "xfailed", known=EXPAND),
    ]
    judgements = {j.suite: j for j in judge(cases)}
    assert [j.suite for j in judge(cases)] == ["invariants", "engine", "sampling", "greedy"], "FAILED, NOT JUDGED, ok"
    greedy = judgements["greedy"]
    assert (greedy.cases, greedy.judged, greedy.passed, greedy.near_ties, greedy.verdict) == (4, 2, 2, 1, OK)
    assert greedy.expected_failures == {"vllm-cpu-expand-kernel": 1} and greedy.not_judged == {"no CUDA device": 1}
    assert greedy.masking_findings == (), "a suite that judged something is not masked"
    sampling = judgements["sampling"]
    assert (sampling.judged, sampling.xfailed, sampling.verdict) == (0, 2, NOT_JUDGED)
    assert sampling.masking_findings == ("vllm-cpu-expand-kernel",)
    assert judgements["engine"].verdict == NOT_JUDGED and judgements["engine"].masking_findings == ()
    assert judgements["invariants"].verdict == FAILED and judgements["invariants"].judged == 1


def test_a_suite_that_cannot_apply_to_the_decoder_is_not_applicable_and_costs_the_run_nothing():
    engine_only = [case("engine", "skipped", f"{NOT_APPLICABLE}decoder 'mtp' has no deployed engine configurations")]
    [engine] = judge(engine_only)
    assert engine.verdict == NOT_APPLICABLE_VERDICT and engine.masking_findings == ()
    assert run_verdict(judge([*engine_only, case("greedy", "passed")])) == (OK, 0)
    text = judgement_text([*engine_only, case("greedy", "passed")], header(RunOptions()))
    assert "NOT JUDGED" not in text and "not applicable" in text
    mixed = judge([*engine_only, case("engine", "skipped", "no CUDA device")])
    assert mixed[0].verdict == NOT_JUDGED, "a suite skipped for another reason too is not judged, not inapplicable"


def test_the_runs_verdict_and_exit_status_follow_its_suites_and_pytest():
    assert run_verdict(judge([case("greedy", "passed")])) == (OK, 0)
    assert run_verdict(judge([case("greedy", "passed"), case("sampling", "xfailed", known=EXPAND)])) == (
        NOT_JUDGED,
        NOT_JUDGED_EXIT,
    ), "a suite masked whole by a finding fails the run"
    assert run_verdict(judge([case("greedy", "failed")])) == (FAILED, 1)
    assert run_verdict(judge([case("greedy", "passed")]), pytest_status=2) == (FAILED, 2), "pytest's own status"


def test_a_suite_that_judged_fewer_cases_than_its_run_asked_reads_too_few_judged():
    cases = [case("greedy", "passed"), case("greedy", "passed"), case("greedy", "xfailed", known=EXPAND)]
    run = {**header(RunOptions()), "min_judged": {"greedy": 3}}
    [greedy] = judge_run(cases, run)
    assert (greedy.judged, greedy.minimum, greedy.verdict) == (2, 3, TOO_FEW)
    assert run_verdict([greedy]) == (NOT_JUDGED, NOT_JUDGED_EXIT)
    assert "greedy TOO FEW JUDGED: 2, fewer than the 3 this run asked of it" in judgement_text(cases, run)
    [met] = judge_run(cases, {**run, "min_judged": {"greedy": 2}})
    assert met.verdict == OK


def test_a_floor_of_zero_lets_a_masked_suite_stay_not_judged_and_nothing_else():
    masked = [case("greedy", "passed"), case("sampling", "xfailed", known=EXPAND)]
    run = {**header(RunOptions()), "min_judged": {"sampling": 0}}
    judgements = judge_run(masked, run)
    sampling = next(j for j in judgements if j.suite == "sampling")
    assert (sampling.verdict, sampling.falls_short) == (NOT_JUDGED, False), "still reads NOT JUDGED"
    assert run_verdict(judgements) == (OK, 0)
    assert "sampling NOT JUDGED: nothing in it was judged (vllm-cpu-expand-kernel); the run allowed it" in (
        judgement_text(masked, run)
    )
    assert run_verdict(judge_run([*masked, case("sampling", "failed")], run)) == (FAILED, 1), "a failure still fails"
    unstated = judge_run([case("greedy", "xfailed", known=EXPAND)], run)
    assert run_verdict(unstated) == (NOT_JUDGED, NOT_JUDGED_EXIT), "the floor of 0 is the named suite's alone"


def test_a_case_two_findings_explain_is_one_expected_failure_counted_for_each_finding():
    both = {"findings": ["position-0", "pre-norm"], "explanation": "together"}
    [j] = judge([case("invariants", "xfailed", known=both), case("invariants", "xfailed", known=EXPAND)])
    assert (j.cases, j.xfailed) == (2, 2)
    assert j.expected_failures == {"position-0": 1, "pre-norm": 1, "vllm-cpu-expand-kernel": 1}


def test_an_expected_failure_without_a_recorded_finding_is_still_counted_as_one():
    [j] = judge([case("greedy", "xfailed")])
    assert j.expected_failures == {"(no finding recorded)": 1} and j.verdict == NOT_JUDGED


def test_a_skip_reason_is_its_first_line_cut_to_the_limit():
    assert skip_reason("decoder 'x' has no such thing\nTraceback ...") == "decoder 'x' has no such thing"
    assert skip_reason("") == "no reason given"
    long = skip_reason("y" * 500)
    assert len(long) == 120 and long.endswith("…")


def test_the_text_names_a_not_judged_suite_its_finding_and_the_command_beneath():
    options = RunOptions(decoder="vllm-mtp", model="tiny-mimo", budget="smoke", seed=7)
    cases = [case("sampling", "xfailed", known=EXPAND)] * 3 + [case("greedy", "passed")]
    text = judgement_text(cases, header(options))
    assert "sampling NOT JUDGED: nothing in it was judged (vllm-cpu-expand-kernel)" in text
    assert "sampling: 3 expected failure(s) of finding vllm-cpu-expand-kernel" in text
    [line] = [line for line in text.splitlines() if "beneath those findings' fixes" in line]
    command = shlex.split(line.split(": ", 1)[1])
    assert command[:4] == ["mtp-harness", "run", "--suite", "sampling"]
    assert "--engine-fixes=vllm-cpu-expand-kernel" in command and "--decoder=vllm-mtp" in command
    assert [row.split()[0] for row in text.splitlines()[1:3]] == ["sampling", "greedy"]
    assert text.splitlines()[1].split()[-2:] == ["NOT", "JUDGED"]


def test_no_command_beneath_where_it_could_not_run_another_release_or_a_finding_without_a_fix():
    """The door refuses --engine-fixes on a release other than the pinned one, and a finding with no fix has nothing
    to apply: the text must not print a command that stops at the door."""
    slug = "transformers-mtp-builds-a-dense-mlp-for-the-moe-mtp-layer"  # a transformers release's: no fix
    masked = [case("greedy", "xfailed", known={"findings": [slug], "explanation": ""})]
    [j] = judge(masked)
    release = RunOptions(decoder="transformers-mtp", engine=EngineOptions(version="5.15.0"))
    assert beneath_command(j, header(release)) is None
    assert beneath_command(j, header(RunOptions(decoder="transformers-mtp"))) is None  # no fix to apply
    assert "beneath those findings' fixes" not in judgement_text(masked, header(release))
    [v] = judge([case("greedy", "xfailed", known=EXPAND)])
    assert beneath_command(v, header(RunOptions(decoder="vllm-mtp", engine=EngineOptions(version="0.31.0")))) is None


def test_the_command_beneath_keeps_the_runs_fixes_and_adds_the_masking_ones():
    options = RunOptions(decoder="vllm-mtp", engine=EngineOptions(fixes=("a-fix",), runner="v2"))
    [j] = judge([case("sampling", "xfailed", known={"findings": ["b-fix", "c-fix"], "explanation": ""})])
    command = beneath_command(j, header(options))
    assert command is not None and "--engine-fixes=a-fix,b-fix,c-fix" in command and "--engine-runner=v2" in command


slugs = st.text("abcdef-", min_size=1, max_size=8).filter(lambda s: not s.startswith("-"))


@given(
    decoder=st.sampled_from(["mtp", "vllm-mtp", "llamacpp-mtp"]),
    budget=st.sampled_from(["smoke", "ci", "full"]),
    seed=st.integers(0, 2**31),
    dtype=st.sampled_from([None, "float32", "float64"]),
    reference=st.sampled_from(list(Reference)),
    fixes=st.lists(slugs, max_size=3, unique=True).map(lambda f: tuple(sorted(f))),
    arguments=st.lists(st.tuples(st.sampled_from(["max_model_len", "block_size"]), st.integers(1, 99)), max_size=2),
    runner=st.sampled_from([None, "v1", "v2"]),
    sampling_tv=st.sampled_from([None, 0.2]),
)
def test_the_run_command_parses_back_into_the_same_options(
    decoder, budget, seed, dtype, reference, fixes, arguments, runner, sampling_tv
):
    """What a summary prints as the command to run is exactly the run's options: `mtp-harness run`'s own parser,
    then the plugin's reading of what follows `--`."""
    from harness.commands.cli import build_parser

    engine = EngineOptions(fixes=fixes, arguments=tuple(arguments), runner=runner)
    options = RunOptions(
        decoder=decoder,
        budget=budget,
        seed=seed,
        dtype=dtype,
        reference=reference,
        engine=engine,
        sampling_tv=sampling_tv,
    )
    command = run_command(options, "sampling")
    args = build_parser().parse_args(command[1:])
    assert args.suite == "sampling"
    parsed = (args.decoder, args.model, args.device, args.dtype, args.budget, int(args.seed), args.reference)
    assert parsed == (decoder, options.model, options.device, dtype, budget, seed, str(reference))
    assert args.engine_fixes == ",".join(fixes) if fixes else args.engine_fixes == "none"
    assert args.engine_runner == runner
    assert [a.split("=", 1)[0] for a in args.engine_arg] == [name for name, _ in arguments]
    assert args.sampling_tv == (repr(sampling_tv) if sampling_tv is not None else None) and not args.pytest_args


def test_a_pytest_run_prints_what_it_judged_and_names_a_suite_that_judged_nothing(pytester, tmp_path):
    """The terminal summary of any harness run (pytest or `mtp-harness run`): a suite of skips only is NOT JUDGED,
    never ok."""
    pytester.makepyfile(
        test_mixed="""
        import pytest

        def test_judged():
            pass

        def test_skipped():
            pytest.skip("no such engine here")
        """
    )
    result = pytester.runpytest_subprocess(f"--harness-report={tmp_path / 'run'}", "-p", "no:cacheprovider")
    output = result.stdout.str()
    assert "mtp-harness: what this run judged, per suite" in output
    lines = output.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.split()[:3] == ["suite", "cases", "judged"])
    row = lines[heading + 1].split()
    assert row[1:] == ["2", "1", "1", "0", "0", "1", "ok"], row  # cases, judged, passed, failed, xfailed, skipped
    assert "1 not judged (skipped): no such engine here" in output


def test_a_pytest_run_of_skips_only_says_not_judged(pytester, tmp_path):
    pytester.makepyfile(test_skips="import pytest\n\ndef test_a():\n    pytest.skip('no GPU')\n")
    result = pytester.runpytest_subprocess(f"--harness-report={tmp_path / 'run'}", "-p", "no:cacheprovider")
    output = result.stdout.str()
    assert "NOT JUDGED: nothing in it was judged (no finding: every case was skipped)" in output, output[-2000:]
