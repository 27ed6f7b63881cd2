"""Each case's expected cost (harness/plugin/case_costs.py) and the order it gives (harness/plugin/case_order.py): the
last run's durations first, then the test function's, then the suite's prior; the time left spread over the workers
but never shorter than the costliest unit left; the costliest units (xdist groups, modules) first, each in pytest's
order."""

from __future__ import annotations

import json
import re

import pytest

from harness.contract.run_options import EngineOptions, RunOptions
from harness.plugin.case_costs import (
    SUITE_PRIORS_S,
    bare_nodeid,
    case_costs,
    durations_before,
    last_durations,
    remaining_s,
    run_kind,
    time_left_s,
    unit_of_nodeid,
    unmeasured,
)

pytest_plugins = ["pytester"]

GREEDY = "suites/greedy/test_g.py::test_natural[k1]"
SAMPLING = "suites/sampling/test_s.py::test_law[case-1]@sampling"


def write_run(root, name, durations, options=None):
    run = root / name
    run.mkdir(parents=True)
    cases = [{"nodeid": nodeid, "duration_s": seconds} for nodeid, seconds in durations.items()]
    header = {} if options is None else {"run": {"options": options.to_record()}}
    (run / "results.json").write_text(json.dumps({**header, "cases": cases}))
    return run


def test_the_last_run_other_than_this_one_gives_the_durations(tmp_path):
    write_run(tmp_path, "20261201-100000", {GREEDY: 9.0})
    write_run(tmp_path, "20261202-100000", {GREEDY: 1.5})
    this_run = write_run(tmp_path, "20261203-100000", {GREEDY: 99.0})  # written while it runs: not a last run
    (tmp_path / "20261204-100000").mkdir()  # no results.json
    assert last_durations(tmp_path, this_run) == {GREEDY: 1.5}
    (tmp_path / "20261202-100000" / "results.json").write_text("{not json")
    assert last_durations(tmp_path, this_run) == {GREEDY: 9.0}  # an unreadable file is passed over
    assert last_durations(tmp_path / "missing") == {}
    assert durations_before(str(this_run)) == {GREEDY: 9.0}  # --harness-report=DIR: DIR's parent holds the runs
    assert durations_before("auto") == durations_before(None) == {}


def test_a_newer_run_of_other_tests_is_passed_over_for_the_last_run_of_these(tmp_path):
    write_run(tmp_path, "20261201-100000", {GREEDY: 9.0})
    write_run(tmp_path, "20261202-100000-mutants", {"mutants::mtp": 0.0})  # a mutation catalogue's run
    this_run = tmp_path / "20261203-100000"
    other_parameters = GREEDY.replace("k1", "k4")  # the same test function: its durations still inform
    assert durations_before(str(this_run), [other_parameters]) == {GREEDY: 9.0}
    assert durations_before(str(this_run)) == {"mutants::mtp": 0.0}  # without this run's cases: the newest
    assert durations_before(str(this_run), [SAMPLING]) == {}


def test_the_last_run_of_another_kind_is_passed_over(tmp_path):
    default = RunOptions(dtype="float64")
    release = RunOptions(decoder="transformers-mtp", dtype="float64", engine=EngineOptions(version="5.23.0"))
    write_run(tmp_path, "20261201-100000", {GREEDY: 0.05}, default)
    write_run(tmp_path, "20261202-100000", {GREEDY: 2.0}, release)  # a transformers release: 40 times dearer
    write_run(tmp_path, "20261203-100000", {GREEDY: 0.05}, RunOptions(dtype="float64", budget="smoke"))
    write_run(tmp_path, "20261204-100000", {GREEDY: 7.0})  # no header: of no known kind
    this_run = tmp_path / "20261205-100000"
    assert durations_before(str(this_run), [GREEDY], run_kind(default)) == {GREEDY: 0.05}
    assert durations_before(str(this_run), [GREEDY], run_kind(release)) == {GREEDY: 2.0}
    assert durations_before(str(this_run), [GREEDY]) == {GREEDY: 7.0}  # no kind asked: the newest of these cases
    assert run_kind(default) != run_kind(RunOptions(dtype="float64", engine=EngineOptions(runner="v2")))
    assert run_kind(default) != run_kind(RunOptions(dtype="float64", sampling_tv=0.05))  # N grows as 1 / TV^2
    assert run_kind(default) != run_kind(RunOptions(dtype="float64", device="cuda"))


def test_a_case_costs_its_last_duration_else_its_function_s_median_else_its_suite_s_prior():
    known = {
        "suites/greedy/test_g.py::test_natural[k1]": 0.2,
        "suites/greedy/test_g.py::test_natural[k2]": 0.4,
        "suites/greedy/test_g.py::test_natural[k3]": 3.0,
        "suites/sampling/test_s.py::test_law[case-1]": 240.0,
    }
    costs = case_costs(
        [
            "suites/greedy/test_g.py::test_natural[k2]",
            "suites/greedy/test_g.py::test_natural[k4]",  # new parameter: the function's median
            SAMPLING,  # the group suffix is not part of what results.json records
            "suites/invariants/test_i.py::test_new",
            "tests/test_u.py::test_other",  # no prior of its own: a greedy case's
        ],
        known,
    )
    assert list(costs.values()) == [0.4, 0.4, 240.0, SUITE_PRIORS_S["invariants"], SUITE_PRIORS_S["greedy"]]
    assert bare_nodeid(SAMPLING) == "suites/sampling/test_s.py::test_law[case-1]"
    assert bare_nodeid("suites/x.py::test[a@b-c]") == "suites/x.py::test[a@b-c]"  # an @ inside parameters stays


def test_a_case_with_no_duration_or_prior_of_its_own_or_its_function_s_is_counted_as_a_guess():
    """A V2 sampling run costs its cases by the harness decoder's suite prior, which says nothing of V2's family in
    Triton's interpreter: those cases are the ones the progress line says it guesses."""
    known = {"suites/greedy/test_g.py::test_natural[k1]": 0.2}
    priors = {"test_s.py::test_law": 6.0, "test_i.py::test_state[k2]": 3.0}
    nodeids = [
        "suites/greedy/test_g.py::test_natural[k4]",  # its function's median
        SAMPLING,  # its function's prior
        "suites/invariants/test_i.py::test_state[k2]",  # its own prior
        "suites/invariants/test_i.py::test_state[k3]",  # a guess: the suite's prior
        "suites/features/test_f.py::test_law[a]@family",  # a guess
    ]
    assert unmeasured(nodeids, known, priors) == set(nodeids[3:])
    assert unmeasured(nodeids, {**known, "suites/invariants/test_i.py::test_state[k1]": 1.0}, priors) == {nodeids[4]}


def test_the_time_left_spreads_what_is_needed_over_the_workers_but_waits_for_the_costliest_unit():
    costs = {GREEDY: 10.0, "suites/greedy/test_g.py::test_other": 20.0, SAMPLING: 30.0, SAMPLING + "-2": 0.0}
    # the greedy case finished; the other runs for 5 s already
    needs = remaining_s(costs, {"suites/greedy/test_g.py::test_other": 5.0}, [GREEDY])
    assert needs == {"suites/greedy/test_g.py::test_other": 15.0, SAMPLING: 30.0, SAMPLING + "-2": 0.0}
    assert unit_of_nodeid(SAMPLING) == "@sampling" and unit_of_nodeid(GREEDY) == GREEDY
    assert time_left_s(needs, workers=1) == pytest.approx(45.0)
    assert time_left_s(needs, workers=2) == pytest.approx(30.0)  # the group's 30 s on one worker, not 45 / 2
    assert time_left_s({GREEDY: 30.0, "suites/greedy/test_g.py::test_other": 30.0}, workers=2) == pytest.approx(30.0)
    assert remaining_s({GREEDY: 1.0}, {GREEDY: 9.0}, []) == {GREEDY: 0.0}  # running past its cost


ORDERED = """
import pytest

@pytest.mark.parametrize("i", range(3))
def test_cheap(i):
    pass

@pytest.mark.xdist_group("family")
@pytest.mark.parametrize("i", range(2))
def test_grouped(i):
    pass

def test_dear():
    pass
"""

SECOND_MODULE = """
def test_a():
    pass

def test_b():
    pass
"""

THIRD_MODULE = """
def test_c():
    pass
"""


def test_the_costliest_units_go_first_each_a_group_or_a_module_in_pytest_s_order(pytester, tmp_path):
    pytester.makeconftest(
        "def pytest_addoption(parser):\n    parser.addoption('--harness-report', dest='harness_report')\n"
    )
    pytester.makepyfile(test_one=ORDERED, test_two=SECOND_MODULE, test_three=THIRD_MODULE)
    root = tmp_path / "reports"
    write_run(
        root,
        "20261202-100000",
        {
            "test_one.py::test_cheap[0]": 0.1,
            "test_one.py::test_cheap[1]": 5.0,
            "test_one.py::test_grouped[0]": 2.0,
            "test_one.py::test_grouped[1]": 7.0,  # the group: 9.0 in all
            "test_one.py::test_dear": 3.0,  # test_one's others: 5.1 + 2.55 (test_cheap[2]: its function's median) + 3
            "test_two.py::test_a": 1.0,
            "test_two.py::test_b": 12.5,  # the module: 13.5 in all
            "test_three.py::test_c": 0.5,
        },
    )
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "-p", "no:mtp_harness", "-p", "harness.plugin.case_order",
        f"--harness-report={root / '20261203-100000'}",
    )  # fmt: skip
    order = [line for line in result.outlines if re.match(r"test_\w+\.py::", line)]
    assert order == [
        "test_two.py::test_a",  # 13.5
        "test_two.py::test_b",
        "test_one.py::test_cheap[0]",  # test_one.py without its group, 10.65, in pytest's order
        "test_one.py::test_cheap[1]",
        "test_one.py::test_cheap[2]",
        "test_one.py::test_dear",
        "test_one.py::test_grouped[0]",  # the group, 9.0
        "test_one.py::test_grouped[1]",
        "test_three.py::test_c",  # 0.5
    ]


def test_a_first_run_of_the_priors_kind_costs_a_case_its_function_s_prior_wherever_the_suites_are_installed(tmp_path):
    from harness.plugin.case_costs import function_priors, function_priors_for, prior_key

    installed = "lib/python3.11/site-packages/harness/suites/greedy/test_g.py::test_natural[k9]@greedy"
    assert prior_key(installed) == prior_key(GREEDY) == "test_g.py::test_natural"
    cases = [{"nodeid": GREEDY, "duration_s": 1.0}, {"nodeid": GREEDY.replace("k1", "k2"), "duration_s": 0.0}]
    assert function_priors([*cases, {"nodeid": SAMPLING, "duration_s": None}]) == {"test_g.py::test_natural": 0.5}
    default = RunOptions(dtype="float64")
    kind = run_kind(default)
    path = tmp_path / "priors.json"
    path.write_text(json.dumps({"measured": "", "run": kind, "functions": {"test_g.py::test_natural": 0.5}}))
    priors = function_priors_for(default, path)
    assert case_costs([installed, "suites/greedy/test_new.py::test_new[a]"], {}, priors) == {
        installed: 0.5,
        "suites/greedy/test_new.py::test_new[a]": SUITE_PRIORS_S["greedy"],  # no prior of its own: its suite's
    }
    # another decoder's cases cost otherwise (the engine suite skips under mtp): the suites' priors then
    assert function_priors_for(RunOptions(decoder="vllm-mtp", dtype="float64"), path) == {}
    assert function_priors_for(default, tmp_path / "missing.json") == {}
    # the committed priors are of the default run, and cover its functions
    assert "test_target_distribution.py::test_samples_follow_the_target_law" in function_priors_for(default)


def test_a_case_that_carries_its_functions_shared_computation_has_a_prior_of_its_own(tmp_path):
    """The sampling family is computed by the case that needs it first: its cost is that case's, not spread over the
    function's cases (which then finish in milliseconds while the estimate waits for them)."""
    from harness.plugin.case_costs import case_key, case_priors, function_priors, function_priors_for

    family = "suites/sampling/test_s.py::test_law[{}]@sampling"
    cases = [{"nodeid": family.format(i), "duration_s": 0.01} for i in range(20)]
    cases.append({"nodeid": family.format("first"), "duration_s": 40.0})
    assert case_key(family.format("first")) == "test_s.py::test_law[first]"
    assert case_priors(cases) == {"test_s.py::test_law[first]": 40.0}
    assert function_priors(cases) == {"test_s.py::test_law": 0.01}, "the other cases' mean, without the carrier"
    assert case_priors([{"nodeid": family.format(i), "duration_s": 0.5} for i in range(5)]) == {}, "under 1 s"
    default = RunOptions(dtype="float64")
    path = tmp_path / "priors.json"
    record = {"measured": "", "run": run_kind(default), "functions": function_priors(cases)}
    path.write_text(json.dumps(record | {"cases": case_priors(cases)}))
    installed = "lib/python3.11/site-packages/harness/suites/sampling/test_s.py::test_law[{}]@sampling"
    costs = case_costs([installed.format("first"), installed.format(3)], {}, function_priors_for(default, path))
    assert costs == {installed.format("first"): 40.0, installed.format(3): 0.01}


def test_an_engine_run_costs_its_cases_by_the_priors_of_its_decoder_and_runner_whatever_its_model(
    tmp_path, monkeypatch
):
    """A first V2 run printed "75/1251 cases (5%), 8m 21s elapsed, about 32s left": its costs were the harness
    decoder's. An engine's decoder on a runner has priors of its own, measured on any model, budget and fixes."""
    import harness.plugin.case_costs as case_costs_module
    from harness.plugin.case_costs import engine_priors_file, function_priors_for, main

    v2 = RunOptions(decoder="vllm-mtp", model="tiny-mimo", engine=EngineOptions(runner="v2"))
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps({"run": {"options": v2.to_record()}, "cases": [{"nodeid": GREEDY, "duration_s": 0.6}]})
    )
    engines = tmp_path / "engine_priors"
    monkeypatch.setattr(case_costs_module, "ENGINE_PRIORS_DIR", engines)
    assert main(["measured here", str(results)]) == 0
    assert engine_priors_file("vllm-mtp", "v2", engines).is_file()
    glm4 = RunOptions(decoder="vllm-mtp", model="tiny-glm4-moe", budget="smoke", engine=EngineOptions(runner="v2"))
    none = tmp_path / "none.json"
    assert function_priors_for(glm4, none, engines) == {"test_g.py::test_natural": 0.6}
    v1 = RunOptions(decoder="vllm-mtp", engine=EngineOptions(runner="v1"))
    assert function_priors_for(v1, none, engines) == {}, "V1's cases: not V2's priors"
    assert function_priors_for(RunOptions(), none, engines) == {}, "the harness's decoder: its own kind only"
    monkeypatch.undo()
    # the committed ones (the door resolves the runner: vLLM's v1 on CPU, llama.cpp's source build), each covering
    # its greedy suite
    for decoder, runner in (("vllm-mtp", "v1"), ("vllm-mtp", "v2"), ("llamacpp-mtp", "source")):
        options = RunOptions(decoder=decoder, engine=EngineOptions(runner=runner))
        assert "test_forced_rejections.py::test_forced_rejections_keep_the_reference" in function_priors_for(options)
