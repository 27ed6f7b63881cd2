"""A run's options as one value (harness/contract/run_options.py): written back as a command line by one function and
read from it by one (harness/subjects/run_options.py), they come back the same; the run header's record of them
too. The end-to-end replay of a failure group's printed command is tests/test_toy_engine.py."""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from harness.contract.run_options import (
    PYTEST_PREFIX,
    RUN_OPTION_FLAGS,
    EngineOptions,
    Reference,
    RunOptions,
    pytest_arguments,
    without_run_options,
)
from harness.subjects.engines.registry import engine_of_decoder
from harness.subjects.engines.vllm.arguments import OWNED_ARGUMENTS
from harness.subjects.run_options import check_engine_arguments

# vLLM's own argument names, but those the harness sets
NAMES = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True).filter(lambda name: name not in OWNED_ARGUMENTS)
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(st.characters(codec="ascii", exclude_characters="\x00"), max_size=12),
    st.sampled_from(["1", "true", "null", "2.5", '"quoted"', "fp8", "a=b", ""]),  # strings that read as other JSON
)
OPTIONS = st.builds(
    RunOptions,
    decoder=st.sampled_from(["mtp", "vllm-mtp", "mutant:no-bonus"]),
    model=st.sampled_from(["tiny-mimo", "/models/a b/c"]),
    device=st.sampled_from(["cpu", "cuda:1"]),
    dtype=st.sampled_from(["float64", "float32", "bfloat16"]),
    budget=st.sampled_from(["smoke", "ci", "full"]),
    seed=st.integers(0, 2**32),
    reference=st.sampled_from(list(Reference)),
    engine=st.builds(
        EngineOptions,
        configuration=st.sampled_from(["default", "prefix-cache"]),
        fixes=st.lists(NAMES, max_size=3, unique=True).map(lambda slugs: tuple(sorted(slugs))),
        arguments=st.dictionaries(NAMES, VALUES, max_size=3).map(lambda values: tuple(values.items())),
        runner=st.sampled_from([None, "v1", "v2", "source"]),
        patches=st.lists(st.sampled_from(["/p/a.patch", "/p/with space.patch", "/p/b=c.diff"]), max_size=3).map(tuple),
    ),
    sampling_tv=st.one_of(st.none(), st.floats(0.001, 0.9)),
)


def parse_back(arguments: list[str]) -> dict[str, object]:
    """The pytest options as the plugin declares them (harness/plugin/options.py), read by argparse."""
    parser = argparse.ArgumentParser()
    for flag in RUN_OPTION_FLAGS:
        repeated = flag.endswith(("engine-arg", "engine-patch"))
        parser.add_argument(flag, action="append" if repeated else "store", default=None)
    return vars(parser.parse_args(arguments))


@given(OPTIONS)
def test_written_back_and_read_again_the_options_are_the_same(options):
    read = parse_back(pytest_arguments(options))
    assert (read["harness_decoder"], read["harness_model"], read["harness_device"]) == (
        options.decoder,
        options.model,
        options.device,
    )
    assert (read["harness_dtype"], read["harness_budget"], int(read["harness_seed"])) == (
        options.dtype,
        options.budget,
        options.seed,
    )
    assert Reference(read["harness_reference"] or Reference.HARNESS) is options.reference
    assert (read["harness_engine_config"] or "default") == options.engine.configuration
    fixes = read["harness_engine_fixes"]
    assert tuple(fixes.split(",") if fixes else ()) == options.engine.fixes
    assert read["harness_engine_runner"] == options.engine.runner
    assert tuple(read["harness_engine_patch"] or ()) == options.engine.patches
    assert (float(read["harness_sampling_tv"]) if read["harness_sampling_tv"] else None) == options.sampling_tv
    vllm = engine_of_decoder("vllm-mtp")
    given_arguments = read["harness_engine_arg"] or []
    assert check_engine_arguments(given_arguments, "vllm-mtp", vllm) == options.engine.arguments


@given(OPTIONS)
def test_the_run_headers_record_of_the_options_reads_back_as_the_same_value(options):
    assert RunOptions.from_record(options.to_record()) == options


def test_a_command_line_without_its_run_options_keeps_what_selects_and_reports_the_tests():
    arguments = ["suites/greedy", "-k", "k2", "--harness-decoder", "x", "--harness-model=m", f"{PYTEST_PREFIX}slow"]
    assert without_run_options(arguments) == ["suites/greedy", "-k", "k2", "--harness-slow"]
