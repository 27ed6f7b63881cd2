"""The harness's checks in your own test file, in the spirit of scikit-learn's `parametrize_with_checks`:

    from harness.testing import parametrize_with_checks

    @parametrize_with_checks("my-engine", suites=["greedy"])
    def test_my_engine(check):
        check()

One pytest case per harness check (a test of the packaged suites: `greedy/test_forced_rejections.py::...`).
The decoder is a registered name (an entry point of the group `mtp_harness.decoders`, a built-in) or
`module:factory` importable in your environment; a factory function is named by its module and qualified
name. The checks run once, as one harness run in a child process (the suites' own settings, the decoder's
model loaded once), the first time a check is called; each case then reports its check's own verdict: the
harness's assertion message on a failure, the skip reason, the finding behind an expected failure. The run's
HTML report and results.json go to `reports/<time>-checks/` (or `report_dir`), and each case carries its
check's record (divergence, sampling, invariants) for your own `--harness-report`.

Under pytest-xdist, `--dist loadgroup` keeps the cases on one worker (they share one harness run).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.contract.budget import BUDGETS, DEFAULT_BUDGET
from harness.contract.errors import HarnessError
from harness.contract.invocation import suites_pytest
from harness.contract.paths import DEFAULT_MODEL, REPORTS, SUITES_DIR
from harness.contract.records import RECORD_PREFIX
from harness.contract.run_options import RunOptions, pytest_arguments
from harness.contract.seeds import DEFAULT_SEED
from harness.contract.suites import CATALOGUE_SUITES as CHECK_SUITES
from harness.contract.suites import marker_expression

PASSING_OUTCOMES = ("passed", "near-tie")
RECORD_KEYS = ("divergence", "sampling", "invariants", "params")  # what a check carries into its caller's report


class ChecksUnavailable(HarnessError):
    """The harness could not list or run its checks for this decoder (the message says why and where the log is)."""


def decoder_name(decoder: str | Callable) -> str:
    """The name a child process finds the decoder by: as given, or `module:qualified_name` of a factory."""
    if isinstance(decoder, str):
        return decoder
    module, qualname = getattr(decoder, "__module__", None), getattr(decoder, "__qualname__", "")
    if not module or module == "__main__" or "<locals>" in qualname:
        raise ChecksUnavailable(
            f"decoder factory {decoder!r}: the checks run in a child process, which finds a factory by "
            "module:name; define it at the top level of an importable module, or register it under the "
            "entry-point group mtp_harness.decoders"
        )
    return f"{module}:{qualname}"


@dataclass
class HarnessChecks:
    """One harness run: a decoder, the suites and a model, with the options of `mtp-harness run`."""

    decoder: str
    suites: Sequence[str] = ("greedy",)
    model: str = str(DEFAULT_MODEL)
    device: str = "cpu"
    dtype: str | None = None
    budget: str = DEFAULT_BUDGET
    select: str | None = None  # a pytest -k expression over the checks
    seed: int | None = None
    workers: int = 0  # pytest-xdist workers of the child run (0: one process)
    report_dir: Path | None = None
    _results: dict[str, dict] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.suites) - set(CHECK_SUITES))
        if unknown or not self.suites:
            raise ChecksUnavailable(f"suites {list(self.suites)}: expected some of {', '.join(CHECK_SUITES)}")
        if self.budget not in BUDGETS:
            raise ChecksUnavailable(f"budget {self.budget!r}: expected one of {', '.join(sorted(BUDGETS))}")

    def command(self) -> list[str]:
        """The pytest command of this run (without the report and collection options)."""
        suites = (SUITES_DIR / suite for suite in self.suites)
        command = [*suites_pytest(suites, cache=False), "-m", marker_expression(tuple(self.suites))]
        options = RunOptions(
            decoder=self.decoder,
            model=self.model,
            device=self.device,
            dtype=self.dtype,
            budget=self.budget,
            seed=DEFAULT_SEED if self.seed is None else self.seed,
        )
        command += pytest_arguments(options)
        command += ["-k", self.select] if self.select else []
        return command

    def node_ids(self) -> list[str]:
        """The checks this run holds, as pytest collects them (node ids relative to the suites' root)."""
        done = subprocess.run([*self.command(), "--collect-only", "-q"], capture_output=True, text=True)
        ids = [line.strip() for line in done.stdout.splitlines() if "::" in line and not line.startswith(" ")]
        if done.returncode not in (0, 5) or not ids:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise ChecksUnavailable(f"listing the harness's checks for decoder {self.decoder!r} found none:\n{tail}")
        return ids

    def results(self) -> dict[str, dict]:
        """Every check's record (results.json's cases by node id), from one run made on first use."""
        if self._results is None:
            run_dir = self.report_dir or REPORTS / (time.strftime("%Y%m%d-%H%M%S") + "-checks")
            run_dir.mkdir(parents=True, exist_ok=True)
            command = [*self.command(), "-q", f"--harness-report={run_dir}"]
            command += ["-n", str(self.workers), "--dist", "loadgroup"] if self.workers else []
            log = run_dir / "log.txt"
            with log.open("w") as output:
                subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, check=False)
            results = run_dir / "results.json"
            if not results.is_file():
                raise ChecksUnavailable(f"the harness run wrote no results.json; its log: {log}")
            cases = json.loads(results.read_text())["cases"]
            self._results = {case["nodeid"]: case | {"log": str(log)} for case in cases}
        return self._results


@dataclass(frozen=True)
class HarnessCheck:
    """One check of a HarnessChecks run; call it to get its verdict as this pytest case's outcome."""

    nodeid: str
    checks: HarnessChecks = field(compare=False)

    def __repr__(self) -> str:
        return f"HarnessCheck({self.nodeid!r})"

    @property
    def record(self) -> dict | None:
        """This check's results.json record, once the run has been made."""
        results = self.checks._results
        return None if results is None else results.get(self.nodeid)

    def __call__(self) -> None:
        case = self.checks.results().get(self.nodeid)
        if case is None:
            log = next(iter(self.checks.results().values()), {}).get("log", "the run's log.txt")
            pytest.fail(f"the harness run recorded no result for {self.nodeid}; see {log}", pytrace=False)
        outcome, message = case["outcome"], case.get("message") or ""
        if outcome in PASSING_OUTCOMES:
            return
        if outcome == "skipped":
            pytest.skip(message)
        if outcome == "xfailed":
            pytest.xfail(message)
        pytest.fail(f"{self.nodeid} {outcome}:\n{message}", pytrace=False)

    def user_properties(self) -> list[tuple[str, str]]:
        """The check's records as the user properties harness.plugin.recorder reads (for the caller's own report)."""
        record = self.record or {}
        return [(RECORD_PREFIX + key, json.dumps(record[key])) for key in RECORD_KEYS if record.get(key)]


def check_id(nodeid: str) -> str:
    """A readable pytest id for a check: `greedy/test_x.py:test_y[params]` ("::" would split node ids)."""
    return nodeid.removeprefix(f"{SUITES_DIR.name}/").replace("::", ":")


def harness_checks(decoder: str | Callable, **options: object) -> list[HarnessCheck]:
    """The checks of one harness run (see HarnessChecks for the options), one per test of the suites."""
    checks = HarnessChecks(decoder_name(decoder), **options)  # type: ignore[arg-type]
    return [HarnessCheck(nodeid, checks) for nodeid in checks.node_ids()]


def parametrize_with_checks(decoder: str | Callable, **options: object) -> pytest.MarkDecorator:
    """`@parametrize_with_checks(decoder, suites=[...], model=..., select=...)`: the decorated test takes a
    `check` argument and runs once per harness check; `check()` gives that check's verdict."""
    group = pytest.mark.xdist_group("mtp-harness-checks")
    checks = harness_checks(decoder, **options)
    params = [pytest.param(check, id=check_id(check.nodeid), marks=group) for check in checks]
    return pytest.mark.parametrize("check", params)
