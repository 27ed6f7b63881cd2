"""A run's options as one value and one table (harness/contract/run_options.py): written back as a command line and
read again by the table's own declarations and the door's checks, they come back the same; the run header's record of
them too; and an option added as one row of the table reaches every front end. The end-to-end replay of a failure
group's printed command is tests/test_toy_engine.py."""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

import harness.contract.run_options as run_options
from harness.commands.cli import build_parser
from harness.contract.run_options import (
    PYTEST_PREFIX,
    RUN_OPTION_TABLE,
    EngineOptions,
    Reference,
    RunOption,
    RunOptions,
    declare_options,
    given_options,
    options_reference,
    pytest_arguments,
    run_command,
    without_run_options,
)
from harness.door import RUN, read_run_options
from harness.door.checks import CHECKS, engine_arg
from harness.door.reading import Reading
from harness.subjects.engines.registry import engine_of_decoder
from harness.subjects.engines.vllm.arguments import OWNED_ARGUMENTS

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
        version=st.sampled_from([None, "0.31.0"]),
    ),
    sampling_tv=st.one_of(st.none(), st.floats(0.001, 0.9)),
)


def parse_back(arguments: list[str]) -> dict[str, object]:
    """The pytest options as the plugin declares them (from the table), read by argparse: option name -> text."""
    parser = argparse.ArgumentParser()
    declare_options(parser.add_argument, lambda row: [row.pytest_flag])
    return given_options(parser.parse_args(arguments), prefix="harness_")


@given(OPTIONS)
def test_written_back_and_read_again_the_options_are_the_same(options):
    read = parse_back(pytest_arguments(options))
    for row in RUN_OPTION_TABLE:  # each option's text is the text its field writes, or the default where it wrote none
        written = row.write(options.value(row.field))
        if row.repeated:
            assert read[row.name] == written, row.name
        else:
            assert [read[row.name]] == (written or [row.default]), row.name
    assert int(read["seed"]) == options.seed and Reference(read["reference"]) is options.reference
    reading = Reading({"decoder": "vllm-mtp"}, RUN, RUN_OPTION_TABLE)
    reading.checked["decoder"], reading.engine = "vllm-mtp", engine_of_decoder("vllm-mtp")
    assert engine_arg(read["engine-arg"], reading) == options.engine.arguments, "the engine's arguments read back"


@given(OPTIONS)
def test_the_run_headers_record_of_the_options_reads_back_as_the_same_value(options):
    assert RunOptions.from_record(options.to_record()) == options


def test_a_command_line_without_its_run_options_keeps_what_selects_and_reports_the_tests():
    arguments = ["suites/greedy", "-k", "k2", "--harness-decoder", "x", "--harness-model=m", f"{PYTEST_PREFIX}slow"]
    assert without_run_options(arguments) == ["suites/greedy", "-k", "k2", "--harness-slow"]


def test_every_option_of_the_table_is_one_field_of_the_run_options_and_every_check_one_option():
    fields = [row.field for row in RUN_OPTION_TABLE]
    assert len(set(fields)) == len(fields) and len({row.name for row in RUN_OPTION_TABLE}) == len(fields)
    for row in RUN_OPTION_TABLE:
        RunOptions().value(row.field)  # a field of RunOptions (an AttributeError otherwise)
    assert set(CHECKS) <= {row.name for row in RUN_OPTION_TABLE}, "a check of an option that is not in the table"


# --- an option added as one row ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToyOptions(RunOptions):
    """RunOptions with the toy option's field (what a real option adds to RunOptions beside its row)."""

    toy_level: int = 0


TOY = RunOption(
    "toy-level",
    "toy_level",
    "how toy the run is (a toy option, added by a test as one row of the table)",
    default="0",
    metavar="LEVEL",
    checked="an integer from 0 to 9",
)


@pytest.fixture
def toy_row(monkeypatch):
    """The toy option as one more row of the table, with its one check."""
    from harness.contract.errors import HarnessError

    def check(value: str, reading: Reading) -> int:
        if not value.isdigit() or int(value) > 9:
            raise HarnessError("a level from 0 to 9")
        return int(value)

    monkeypatch.setattr(run_options, "RUN_OPTION_TABLE", (*RUN_OPTION_TABLE, TOY))
    monkeypatch.setitem(CHECKS, TOY.name, check)
    return TOY


def test_an_option_added_as_one_row_reaches_every_front_end(toy_row, capsys):
    # `mtp-harness run --help`
    with pytest.raises(SystemExit), redirect_stdout(io.StringIO()) as shown:
        build_parser().parse_args(["run", "--help"])
    assert "--toy-level LEVEL, --harness-toy-level LEVEL" in shown.getvalue()
    assert "how toy the run is" in " ".join(shown.getvalue().split())
    # the pytest plugin's options
    from harness.plugin.options import pytest_addoption

    declared = {}

    class Group:
        def addoption(self, *flags, **keywords):
            declared.update(dict.fromkeys(flags, keywords))

    class Parser:
        def getgroup(self, *names):
            return Group()

    pytest_addoption(Parser())
    assert declared["--harness-toy-level"]["default"] == "0"
    # the parsed RunOptions, from `mtp-harness run`'s command line and through the door with its check
    args = build_parser().parse_args(["run", "--toy-level", "3", "--budget", "smoke"])
    options = read_run_options(given_options(args), RUN, options_type=ToyOptions)
    assert options.toy_level == 3 and options.budget == "smoke"
    with pytest.raises(Exception, match=r"^--toy-level 12: a level from 0 to 9$"):
        read_run_options({"toy-level": "12"}, RUN, options_type=ToyOptions)
    # the printed reproducer commands
    assert "--harness-toy-level=3" in pytest_arguments(options)
    assert run_command(options, "greedy")[-1] == "--toy-level=3"
    assert "--harness-toy-level" not in " ".join(pytest_arguments(ToyOptions())), "at its default it is not written"
    # the docs' option reference
    assert "| `--toy-level LEVEL` | `--harness-toy-level` | `0` | how toy the run is" in options_reference()
