"""Reading a run's options: one loop over the table (harness/contract/run_options.py), each option's check in the
table's order, so a check may read what the options above it were checked to be. A check refuses with one line; the
loop names the option as the front end spells it and the value, and stops there."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.contract.errors import HarnessError
from harness.contract.run_options import Given, RunOption, RunOptions, option_named

if TYPE_CHECKING:
    from harness.subjects.engines.engine import Engine


@dataclass(frozen=True)
class FrontEnd:
    """A front end of the door: the name its messages begin with, and how it spells an option."""

    name: str
    spell: Callable[[RunOption], str]


RUN = FrontEnd("mtp-harness run", lambda row: row.cli_flag)
PYTEST = FrontEnd("mtp-harness", lambda row: row.pytest_flag)
# a command that starts pytest with options it was given (`mtp-harness run`, `nightly`) names itself here in its pytest
# child's environment: the door there names the options as the command spells them (`--decoder`)
FRONT_END_VARIABLE = "MTP_HARNESS_FRONT_END"


def front_end_named(name: str) -> FrontEnd:
    """The front end a command named in FRONT_END_VARIABLE (its flags as `mtp-harness` commands spell them); pytest's
    where none is named."""
    return FrontEnd(name, RUN.spell) if name else PYTEST


class UsageError(HarnessError):
    """A run's option that cannot work, found before any test runs: the option as the front end spells it, the value,
    and what is wrong."""


class Refusal(HarnessError):
    """A check's refusal: what is wrong; the value refused (default: all the option was given) and the option to name
    (default: the one being checked), where the fault is one value of a repeated option, or another option's."""

    def __init__(self, message: str, value: str | None = None, option: str | None = None) -> None:
        super().__init__(message)
        self.value = value
        self.option = option


class Reading:
    """The options being read: what the front end gave each (its default where absent), the checked value of each
    option read so far, and the decoder's engine once the decoder is read (None: the harness's process runs it)."""

    def __init__(self, given: Mapping[str, Given], front_end: FrontEnd, table: Sequence[RunOption]) -> None:
        self.given = {row.name: given.get(row.name, [] if row.repeated else row.default) for row in table}
        self.front_end = front_end
        self.table = table
        self.checked: dict[str, Any] = {}
        self.engine: Engine | None = None

    def flag(self, name: str) -> str:
        """Option `name` as the front end spells it (`--engine-runner`, `--harness-engine-runner`)."""
        return self.front_end.spell(option_named(name, self.table))


Check = Callable[[Any, Reading], Any]  # (what the option was given, the reading so far) -> the field's value


def read_options(
    given: Mapping[str, Given],
    front_end: FrontEnd,
    table: Sequence[RunOption],
    checks: Mapping[str, Check],
    make: Callable[[Mapping[str, Any]], RunOptions] = RunOptions.from_fields,
) -> RunOptions:
    """The run's options: each option of the table checked in order (an option without a check keeps its text);
    a UsageError for the first that cannot work."""
    reading = Reading(given, front_end, table)
    values: dict[str, Any] = {}
    for row in table:
        values[row.field] = reading.checked[row.name] = checked(row, reading, checks.get(row.name))
    return make(values)


def checked(row: RunOption, reading: Reading, check: Check | None) -> Any:
    """What option `row` was given, checked (without a check: its text); a UsageError that names the option as the
    front end spells it and the value refused."""
    value = reading.given[row.name]
    try:
        return check(value, reading) if check is not None else value
    except HarnessError as error:
        refusal = error if isinstance(error, Refusal) else Refusal(str(error))
        flag = reading.flag(refusal.option) if refusal.option else reading.front_end.spell(row)
        shown = refusal.value if refusal.value is not None else " ".join(value) if row.repeated else value
        raise UsageError(f"{flag} {shown}: {refusal}") from None
