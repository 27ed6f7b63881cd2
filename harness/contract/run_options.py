"""A run's options as one typed value, and the one table that declares them.

`RunOptions` is everything that decides what a run computes: what runs (decoder, model, device, dtype), how hard
(budget, seed, prompts, the sampling suite's detectable shift), where the truth comes from (reference) and how an
engine subject runs (`EngineOptions`). `RUN_OPTION_TABLE` holds one row per option: its name, the field it fills,
its default as a command line gives it, its help and what the door checks. Every front end is a loop over that table:
`mtp-harness run`'s parser and the pytest plugin's options (`declare_options`), the values a front end was given
(`given_options`), the door that reads and checks them into a `RunOptions` (harness/door/), the command lines that
replay a run (`pytest_arguments`, `run_command`) and the docs' option reference (`options_reference`). A new option is
one row here, a field of `RunOptions` and, where the door must check more than its text, one check in
harness/door/checks.py.

Pure data (no torch, no argparse, no pytest): the plugin imports it before any test runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Literal

from harness.contract.budget import BUDGETS, DEFAULT_BUDGET
from harness.contract.paths import DEFAULT_MODEL, DEFAULT_PROMPTS
from harness.contract.seeds import DEFAULT_SEED

DEFAULT_DECODER = "mtp"
DEFAULT_DEVICE = "cpu"
DEFAULT_CONFIGURATION = "default"  # an engine's own settings, no deployed configuration
NO_FIXES = "none"  # --engine-fixes: the engine as shipped
ALL_FIXES = "all"  # --engine-fixes: every documented fix of the engine's findings
PYTEST_PREFIX = "--harness-"  # every option the pytest plugin registers starts with it

Scalar = str | int | float | bool | None  # an engine argument's value: JSON data, never code
SeedChoice = int | Literal["random", "last"]
Given = str | list[str] | None  # an option's value as a command line gives it (a list for a repeated option)


class Reference(StrEnum):
    """Where the target-only truth comes from."""

    HARNESS = "harness"  # the harness's own copy of the checkpoint, in its process
    ENGINE = "engine"  # the engine under test without speculation, and its own log-probabilities


@dataclass(frozen=True)
class EngineOptions:
    """How an engine subject runs: its deployed configuration, the findings whose documented fix it runs with (sorted
    slugs; empty: as shipped), its own arguments, passed through as data (name, value) in the order given, the
    runner it runs (vLLM's model runner: v1 or v2; llama.cpp's build: source or wheel; None for an engine with one),
    the user's own patches to its source, applied in its build in the order given (absolute paths; an engine built
    from its source only: llama.cpp), and the engine's release whose environment runs (None: the pinned one)."""

    configuration: str = DEFAULT_CONFIGURATION
    fixes: tuple[str, ...] = ()
    arguments: tuple[tuple[str, Scalar], ...] = ()
    runner: str | None = None
    patches: tuple[str, ...] = ()
    version: str | None = None

    @property
    def argument_values(self) -> dict[str, Scalar]:
        return dict(self.arguments)

    @property
    def is_default(self) -> bool:
        return self == EngineOptions()


@dataclass(frozen=True)
class RunOptions:
    """Everything that decides what a run computes. `dtype` is the resolved dtype name (float64, float32, bfloat16,
    float16) once the door read it; `seed` is the session seed, or 'random' / 'last' until the pytest session resolves
    it."""

    decoder: str = DEFAULT_DECODER
    model: str = str(DEFAULT_MODEL)
    device: str = DEFAULT_DEVICE
    dtype: str | None = None
    budget: str = DEFAULT_BUDGET
    seed: SeedChoice = DEFAULT_SEED
    reference: Reference = Reference.HARNESS
    engine: EngineOptions = field(default_factory=EngineOptions)
    prompts: str = str(DEFAULT_PROMPTS)
    sampling_tv: float | None = None  # None: the budget's
    min_judged: tuple[tuple[str, int], ...] = ()  # (suite, the fewest judged cases its verdict needs): CI's floors

    def with_seed(self, seed: int) -> RunOptions:
        return replace(self, seed=seed)

    def value(self, path: str) -> Any:
        """The value of a field by its dotted path (`engine.fixes`)."""
        value: Any = self
        for part in path.split("."):
            value = getattr(value, part)
        return value

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> RunOptions:
        """The options with these fields, by dotted path (`engine.fixes`); the others at their defaults."""
        engine = {path.removeprefix("engine."): v for path, v in values.items() if path.startswith("engine.")}
        top = {path: v for path, v in values.items() if not path.startswith("engine.")}
        return cls(**top, engine=EngineOptions(**engine))

    def to_record(self) -> dict[str, Any]:
        """As JSON data (the run header's `options`; what an xdist worker is handed); from_record reads it back."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "engine"}
        record["reference"] = str(self.reference)
        record["min_judged"] = [[suite, count] for suite, count in self.min_judged]
        engine = {f.name: getattr(self.engine, f.name) for f in fields(self.engine)}
        record["engine"] = {
            **engine,
            "fixes": list(self.engine.fixes),
            "arguments": [[name, value] for name, value in self.engine.arguments],
            "patches": list(self.engine.patches),
        }
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RunOptions:
        engine = record.get("engine") or {}
        known = {f.name for f in fields(cls)} - {"engine", "reference", "min_judged"}
        return cls(
            **{name: value for name, value in record.items() if name in known},
            reference=Reference(record.get("reference", Reference.HARNESS)),
            min_judged=tuple((str(suite), int(count)) for suite, count in record.get("min_judged", ())),
            engine=EngineOptions(
                configuration=engine.get("configuration", DEFAULT_CONFIGURATION),
                fixes=tuple(engine.get("fixes", ())),
                arguments=tuple((str(name), value) for name, value in engine.get("arguments", ())),
                runner=engine.get("runner"),
                patches=tuple(engine.get("patches", ())),
                version=engine.get("version"),
            ),
        )


def engine_argument_text(name: str, value: Scalar) -> str:
    """NAME=VALUE as --engine-arg reads it back: a string that would read as other JSON is written quoted."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return f"{name}={value}"
    return f"{name}={json.dumps(value)}"


def text_of(value: Any) -> list[str]:
    """A field's value as command-line text: none for None, else its str."""
    return [] if value is None else [str(value)]


@dataclass(frozen=True)
class RunOption:
    """One option of a run. `name` is its flag without dashes (`engine-fixes`: `--engine-fixes` for `mtp-harness run`,
    `--harness-engine-fixes` for pytest); `field` the RunOptions field it fills, dotted for an engine option
    (`engine.fixes`); `default` its value as a command line gives it when absent; `repeated` an option given once per
    value (a list); `checked` what the door checks, in words; `write` the field's value back as command-line text (a
    repeated option: one text per value); `always_written` a field every replay command names, at its default too."""

    name: str
    field: str
    help: str
    default: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    repeated: bool = False
    checked: str = ""
    write: Callable[[Any], list[str]] = text_of
    always_written: bool = False

    @property
    def cli_flag(self) -> str:
        return "--" + self.name

    @property
    def pytest_flag(self) -> str:
        return PYTEST_PREFIX + self.name

    @property
    def dest(self) -> str:
        """The attribute a parser stores it under (`engine_fixes`; pytest's: `harness_engine_fixes`)."""
        return self.name.replace("-", "_")


RUN_OPTION_TABLE: tuple[RunOption, ...] = (  # the order the door checks them in: a check may read those above it
    RunOption(
        "decoder",
        "decoder",
        "decoder under test: a registered name (mtp, target, transformers-mtp, vllm-mtp, llamacpp-mtp, mutant:<name>, "
        "an entry point of mtp_harness.decoders) or module:factory for your own (default: %(default)s)",
        default=DEFAULT_DECODER,
        metavar="NAME",
        checked="a known name (near matches otherwise) or a module:factory that imports; an engine's decoder needs "
        "its environment installed",
        always_written=True,
    ),
    RunOption(
        "engine-version",
        "engine.version",
        "an engine subject at another release than the pinned one, as shipped, from its own environment "
        "(mtp-harness engine install NAME --version RELEASE); the findings watch only the releases they were "
        "measured on, so anything another release fails is a failure (default: the pinned release)",
        metavar="RELEASE",
        checked="the decoder is an engine's; a release number; its environment installed",
    ),
    RunOption(
        "device",
        "device",
        "torch device for the model: cpu, cuda, cuda:N (default: %(default)s)",
        default=DEFAULT_DEVICE,
        metavar="DEVICE",
        checked="cpu or cuda[:N]; CUDA present when asked for",
        always_written=True,
    ),
    RunOption(
        "dtype",
        "dtype",
        "model dtype: float64, float32, bf16, fp16 (default: the decoder's own, vLLM and llama.cpp float32 on CPU; "
        "else float64 on CPU, where exact identity is expected, and bf16 on CUDA)",
        metavar="DTYPE",
        checked="a known dtype; resolved to its canonical name (float64, float32, bfloat16, float16)",
        always_written=True,
    ),
    RunOption(
        "reference",
        "reference",
        "the target-only truth: harness (the harness's own copy of the checkpoint, loaded in this process) or engine "
        "(the engine under test without speculation and its log-probabilities; this process then reads no weight "
        "file, and the checks that need weights are skipped with the reason) (default: %(default)s)",
        default=str(Reference.HARNESS),
        metavar="{" + ",".join(Reference) + "}",
        checked="harness or engine; engine only for an engine that can be its own reference (it scores sequences)",
    ),
    RunOption(
        "model",
        "model",
        "model directory (config.json, safetensors, tokenizer.json) or the name of a bundled fixture "
        f"(default: {DEFAULT_MODEL.name})",
        default=str(DEFAULT_MODEL),
        metavar="DIR|FIXTURE",
        checked="the directory exists or names a bundled fixture; config.json reads; its tensor names are in an "
        "MTP layout the harness knows; the tokenizer is there (no weight is read; under --reference engine only "
        "config.json and the tokenizer); what the decoder's engine needs of it (llama.cpp: a GGUF)",
        always_written=True,
    ),
    RunOption(
        "budget",
        "budget",
        "smoke | ci | full: sampling N, Hypothesis examples, calibration reruns, which mutants "
        "(default: %(default)s); MTP_HARNESS_HYPOTHESIS_PROFILE, when set, still picks the Hypothesis profile",
        default=DEFAULT_BUDGET,
        metavar="{" + ",".join(sorted(BUDGETS)) + "}",
        checked="a known budget",
        always_written=True,
    ),
    RunOption(
        "seed",
        "seed",
        "session seed: an integer, 'random' for a new one, or 'last' to replay the previous run's (default: "
        "%(default)s); it moves every case's randomness",
        default=str(DEFAULT_SEED),
        metavar="SEED",
        checked="an integer, random or last (last: a seed in pytest's cache, checked when the session starts)",
        always_written=True,
    ),
    RunOption(
        "engine-config",
        "engine.configuration",
        "an engine subject under a deployed configuration (vLLM: prefix-cache, chunked-prefill, preempt, queue, async; "
        "llama.cpp: prefix-cache, chunked-prefill, queue, context-shift), every suite under it "
        "(default: %(default)s, the harness's own engine settings)",
        default=DEFAULT_CONFIGURATION,
        metavar="NAME",
        checked="a configuration of the decoder's engine",
    ),
    RunOption(
        "engine-runner",
        "engine.runner",
        "an engine subject's runner: vLLM's model runner (v1, v2; on CPU, v2 runs its Triton kernels in Triton's "
        "interpreter), llama.cpp's build (source: built here with the harness's instrumentation; wheel: the "
        "published wheel) (default: the one the engine picks on the device: vLLM v1 on CPU and v2 on CUDA, "
        "llama.cpp source; another release runs its published package)",
        metavar="NAME",
        checked="a runner of the decoder's engine that its installed environment can run",
    ),
    RunOption(
        "engine-fixes",
        "engine.fixes",
        "an engine subject with the documented fix of the named findings applied (beneath the known bugs): vLLM inside "
        "its process, llama.cpp built into its source; a fixed finding marks no test (default: %(default)s, the "
        "engine as shipped)",
        default=NO_FIXES,
        metavar="none|all|SLUG[,SLUG...]",
        checked="findings of the decoder's engine, each with a fix the engine can apply (llama.cpp: a patch, on its "
        "build from source); the pinned release only",
        write=lambda fixes: [",".join(fixes)] if fixes else [],
    ),
    RunOption(
        "engine-patch",
        "engine.patches",
        "a change of your own to the source of an engine built from it (llama.cpp: a diff relative to its tree, as "
        "git diff writes it), applied in its build after the harness's instrumentation (repeat it); the build is made "
        "first when missing",
        metavar="FILE",
        repeated=True,
        checked="an engine built from its source, running that build; each file exists and is not empty",
        write=list,
    ),
    RunOption(
        "engine-arg",
        "engine.arguments",
        "one of an engine subject's own arguments, passed through as data (repeat it), e.g. quantization=fp8 (vLLM's "
        "LLM arguments); the harness's own settings (model, dtype, speculation, --engine-config's) are refused",
        metavar="NAME=VALUE",
        repeated=True,
        checked="an engine that takes arguments; NAME=VALUE, VALUE a number, true, false, null or a string; none the "
        "harness sets itself",
        write=lambda arguments: [engine_argument_text(name, value) for name, value in arguments],
    ),
    RunOption(
        "prompts",
        "prompts",
        "prompt fixture file (JSON) (default: the bundled fixtures/prompts.json)",
        default=str(DEFAULT_PROMPTS),
        metavar="FILE",
        checked="the file exists",
    ),
    RunOption(
        "sampling-tv",
        "sampling_tv",
        "the total-variation shift each first-token-law case must detect with power 0.99 at the family alpha; sets N "
        "per case (default: the budget's, "
        + ", ".join(f"{name} {budget.sampling_tv}" for name, budget in BUDGETS.items())
        + "); the whole-sequence cases' single-position shift scales with it",
        metavar="TV",
        checked="a number in (0, 1)",
        write=lambda tv: [] if tv is None else [repr(tv)],
    ),
    RunOption(
        "min-judged",
        "min_judged",
        "the fewest judged cases each named suite needs: below it the suite reads TOO FEW JUDGED and `mtp-harness run` "
        "exits 6, as it does for a suite that judged nothing (a CI lane's floors, from its measured counts); 0 lets a "
        "suite stay NOT JUDGED (a lane where every case of it is a measured expected failure)",
        metavar="SUITE=N[,SUITE=N...]",
        checked="known suites, each with a whole number",
        write=lambda floors: [",".join(f"{suite}={count}" for suite, count in floors)] if floors else [],
    ),
)


def the_table(table: Sequence[RunOption] | None) -> Sequence[RunOption]:
    """`table`, or the run options' table where None: read when called, so a row added to the table reaches every front
    end."""
    return RUN_OPTION_TABLE if table is None else table


def option_named(name: str, table: Sequence[RunOption] | None = None) -> RunOption:
    """The row of option `name`."""
    table = the_table(table)
    return next(row for row in table if row.name == name)


def declare_options(
    add: Callable[..., object],
    flags: Callable[[RunOption], Sequence[str]],
    table: Sequence[RunOption] | None = None,
) -> None:
    """Declare every option of the table with `add` (argparse's add_argument, pytest's addoption: the same keywords),
    under the flags `flags` gives each row. Values stay text: the door reads them."""
    table = the_table(table)
    for row in table:
        keywords: dict[str, object] = {"help": row.help, "default": [] if row.repeated else row.default}
        if row.repeated:
            keywords["action"] = "append"
        if row.choices:
            keywords["choices"] = list(row.choices)
        if row.metavar:
            keywords["metavar"] = row.metavar
        add(*flags(row), **keywords)


def given_options(namespace: object, prefix: str = "", table: Sequence[RunOption] | None = None) -> dict[str, Given]:
    """What a parsed command line gave each option (its default where absent), by option name; `prefix`: the
    attribute prefix of the parser's namespace (pytest's `harness_`)."""
    table = the_table(table)
    return {row.name: getattr(namespace, prefix + row.dest) for row in table}


def written_options(options: RunOptions, table: Sequence[RunOption] | None = None) -> list[tuple[RunOption, str]]:
    """The options that make a run with `options`, as (row, text) pairs: what runs, its budget and seed always; the
    others where not at their defaults. A repeated option gives one pair per value."""
    table = the_table(table)
    default = type(options)()
    return [
        (row, text)
        for row in table
        if row.always_written or row.write(options.value(row.field)) != row.write(default.value(row.field))
        for text in row.write(options.value(row.field))
    ]


def pytest_arguments(options: RunOptions, table: Sequence[RunOption] | None = None) -> list[str]:
    """The pytest options that make a run with `options` (the plugin's --harness-... options)."""
    table = the_table(table)
    return [f"{row.pytest_flag}={text}" for row, text in written_options(options, table)]


def given_arguments(given: Mapping[str, Given], table: Sequence[RunOption] | None = None) -> list[str]:
    """What a front end was given, as the plugin's pytest options, unchecked (the door in pytest reads them): each
    option given a value other than its default, a repeated option once per value."""
    table = the_table(table)
    arguments = []
    for row in table:
        value = given.get(row.name, row.default)
        values = value if isinstance(value, list) else [] if value is None or value == row.default else [value]
        arguments += [f"{row.pytest_flag}={text}" for text in values]
    return arguments


def run_command(options: RunOptions, suites: str, table: Sequence[RunOption] | None = None) -> list[str]:
    """The `mtp-harness run` command line of a run with `options` on these suites (comma-joined names): what a summary
    prints to run a suite again, e.g. beneath the findings that masked it."""
    table = the_table(table)
    return [
        "mtp-harness",
        "run",
        "--suite",
        suites,
        *(f"{row.cli_flag}={text}" for row, text in written_options(options, table)),
    ]


def without_run_options(arguments: Iterable[str], table: Sequence[RunOption] | None = None) -> list[str]:
    """A pytest command line's arguments without those that carry run options (`--harness-decoder=x` or
    `--harness-decoder x`): what selects and reports the tests, to be joined with pytest_arguments(options)."""
    table = the_table(table)
    flags = {row.pytest_flag for row in table}
    kept, skip_value = [], False
    for argument in arguments:
        if skip_value:
            skip_value = False
            continue
        flag = argument.split("=", 1)[0]
        if flag in flags:
            skip_value = "=" not in argument
            continue
        kept.append(argument)
    return kept


def options_reference(table: Sequence[RunOption] | None = None) -> str:
    """The docs' option reference (docs/reference/options.md), written from the table: one row per option."""
    table = the_table(table)

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [
        "| `mtp-harness run` | pytest | default | meaning | checked at the door |",
        "|---|---|---|---|---|",
    ]
    for row in table:
        help_text = row.help.replace("%(default)s", str(row.default))
        value = f" {row.metavar}" if row.metavar else " {" + ",".join(row.choices) + "}" if row.choices else ""
        default = "" if row.default is None else f"`{row.default}`"
        if row.name in ("model", "prompts"):  # a path of this clone: named, not printed
            default = "the bundled fixture"
        lines.append(
            f"| `{row.cli_flag}{cell(value)}` | `{row.pytest_flag}` | {cell(default)} | {cell(help_text)} "
            f"| {cell(row.checked)} |"
        )
    return "\n".join(lines) + "\n"
