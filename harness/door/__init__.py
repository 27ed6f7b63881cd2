"""The door: a run's options, as a front end was given them, read and checked once before any test runs
(reading.py: one loop over the table of run options, harness/contract/run_options.py; checks.py: one check per
option). Bad input stops here as one line that names the option as the front end spells it (`--decoder` for
`mtp-harness run`, `--harness-decoder` for pytest) and the value. What only an engine knows (its runners, its
fixes, its own arguments) the checks ask of the engine's abilities (harness/subjects/engines/abilities.py).

Imports: harness.contract, harness.models (the checkpoint checks) and harness.subjects; the plugin and the commands
import it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.contract.run_options import Given, RunOption, RunOptions, the_table
from harness.door.checks import CHECKS
from harness.door.reading import PYTEST, RUN, FrontEnd, Refusal, UsageError, read_options

__all__ = ["PYTEST", "RUN", "FrontEnd", "Refusal", "UsageError", "read_run_options"]


def read_run_options(
    given: Mapping[str, Given],
    front_end: FrontEnd = PYTEST,
    table: Sequence[RunOption] | None = None,
    options_type: type[RunOptions] = RunOptions,
) -> RunOptions:
    """The run's options (an `options_type`) from what the front end was given (option name -> value; absent: its
    default), each checked in the table's order by its check in CHECKS; a UsageError, one line, for the first that
    cannot work."""
    return read_options(given, front_end, the_table(table), CHECKS, options_type.from_fields)
