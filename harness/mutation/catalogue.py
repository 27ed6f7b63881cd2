"""The mutation catalogue run: every suite against the correct decoder and against every mutant.

Each decoder runs in its own pytest process (a crash or a hang stays with its decoder). A cell of the table
is "caught" when a test of that suite failed on an assertion, "crashed" when the decoder raised instead,
"not caught" when every test passed or skipped, "not run" when the run stopped before reaching the suite.
Two modes:
    first catch (default): a mutant's suites run target suite first (the one aimed at the part it
        replaces), and the run stops at the first catch: enough for the mutation score, minutes on a CPU;
    full table: every suite runs on every mutant, each suite stopping at its own first catch.
The correct decoder and the controls (mutants expected to pass) always run every suite in full.
Processes run `workers` at a time, one torch thread each.
"""

from __future__ import annotations

import os
import subprocess
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from harness.contract.invocation import suites_pytest
from harness.contract.paths import SUITES_DIR, suite_of_junit
from harness.contract.run_options import RunOptions, pytest_arguments
from harness.contract.suites import CATALOGUE_SUITES, marker_expression

CORRECT_DECODER = "mtp"
CATCH_MESSAGES = ("Failed", "AssertionError")  # junit messages of pytest.fail / assert: the suite caught it


@dataclass(frozen=True)
class Cell:
    """One suite on one decoder."""

    status: str  # "caught" | "not caught" | "crashed" | "passed" | "failed" (the last two: correct decoder)
    tests: int
    failed: int
    first_failure: str = ""
    message: str = ""


@dataclass
class DecoderRun:
    decoder: str
    cells: dict[str, Cell]
    exit_code: int
    elapsed_s: float
    command: list[str] = field(default_factory=list)


# transformers' own use_mtp generation is a subject of the greedy suite, not a function of --decoder
# (node ids: relative to the suites' root, which harness.contract.invocation sets)
NOT_ABOUT_THE_DECODER = ("suites/greedy/test_transformers_use_mtp.py",)


def pytest_command(
    decoder: str,
    suites: Sequence[str],
    junit: Path,
    options: RunOptions,
    stop_at_first_catch: bool,
    selection: Sequence[str] = (),
) -> list[str]:
    """One decoder under the catalogue's options, the suites in the order given, each stopping at its first catch (or
    the whole run); `selection`: pytest arguments that select tests (-k)."""
    return [
        *suites_pytest((SUITES_DIR / suite for suite in suites), cache=False),
        "-m",
        marker_expression(tuple(suites)),
        "-q",
        *pytest_arguments(replace(options, decoder=decoder)),
        "--harness-stop-suite-on-catch",
        *(["--harness-stop-on-catch"] if stop_at_first_catch else []),
        *(f"--deselect={path}" for path in NOT_ABOUT_THE_DECODER),
        f"--junitxml={junit}",
        *selection,
    ]


def read_cells(junit: Path, suites: Sequence[str], correct: bool) -> dict[str, Cell]:
    """Per suite: how many tests ran, how many failed, and whether that is a catch or a crash."""
    cases: dict[str, list[ElementTree.Element]] = {suite: [] for suite in suites}
    if junit.is_file():
        for case in ElementTree.parse(junit).iter("testcase"):
            suite = suite_of_junit(case.get("classname", ""))
            if suite in cases:
                cases[suite].append(case)
    return {suite: _cell(members, correct) for suite, members in cases.items()}


def _cell(cases: list[ElementTree.Element], correct: bool) -> Cell:
    failures = [(case, child) for case in cases for child in case if child.tag in ("failure", "error")]
    if not cases:
        return Cell("not run", 0, 0)
    if not failures:
        return Cell("passed" if correct else "not caught", len(cases), 0)
    caught = [
        (case, child)
        for case, child in failures
        if child.tag == "failure" and child.get("message", "").startswith(CATCH_MESSAGES)
    ]
    case, child = (caught or failures)[0]
    status = "failed" if correct else ("caught" if caught else "crashed")
    name = f"{case.get('classname', '')}::{case.get('name', '')}"
    return Cell(status, len(cases), len(failures), name, child.get("message", "")[:2000])


def suite_order(decoder: str, suites: Sequence[str]) -> list[str]:
    """The mutant's target suite first, then the others in catalogue order."""
    from harness.subjects.decoder_registry import MUTANT_PREFIX
    from harness.subjects.mutant_decoders import TARGET_SUITE

    target = TARGET_SUITE.get(decoder.removeprefix(MUTANT_PREFIX))
    return sorted(suites, key=lambda suite: (suite != target, CATALOGUE_SUITES.index(suite)))


def stops_at_first_catch(decoder: str, full_table: bool) -> bool:
    """Only mutants expected to be caught stop early; the correct decoder and the controls run in full."""
    from harness.subjects.decoder_registry import MUTANT_PREFIX
    from harness.subjects.mutant_decoders import EXPECTED_VERDICT

    return not full_table and EXPECTED_VERDICT.get(decoder.removeprefix(MUTANT_PREFIX)) == "caught"


def run_decoder(
    decoder: str,
    suites: Sequence[str],
    run_dir: Path,
    options: RunOptions,
    full_table: bool = False,
    selection: Sequence[str] = (),
) -> DecoderRun:
    """Run the suites on one decoder in a fresh process with one torch thread."""
    junit = run_dir / f"junit-{decoder.replace(':', '-')}.xml"
    stops = stops_at_first_catch(decoder, full_table)
    command = pytest_command(decoder, suite_order(decoder, suites), junit, options, stops, selection)
    log = run_dir / f"log-{decoder.replace(':', '-')}.txt"
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started = time.perf_counter()
    with log.open("w") as output:
        code = subprocess.call(command, stdout=output, stderr=subprocess.STDOUT, env=environment)
    elapsed = time.perf_counter() - started
    return DecoderRun(decoder, read_cells(junit, suites, decoder == CORRECT_DECODER), code, elapsed, command)


def run_catalogue(
    decoders: Sequence[str],
    suites: Sequence[str],
    run_dir: Path,
    options: RunOptions,
    workers: int = 2,
    progress: Callable[[DecoderRun], None] | None = None,
    full_table: bool = False,
    selection: Sequence[str] = (),
) -> list[DecoderRun]:
    """Every decoder through every suite under `options` (the decoder replaced), `workers` processes at a time;
    results in the order given."""
    run_dir.mkdir(parents=True, exist_ok=True)

    def one(decoder: str) -> DecoderRun:
        result = run_decoder(decoder, suites, run_dir, options, full_table, selection)
        if progress is not None:
            progress(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        started = {decoder: pool.submit(one, decoder) for decoder in longest_first(decoders, full_table)}
        return [started[decoder].result() for decoder in decoders]


def longest_first(decoders: Sequence[str], full_table: bool = False) -> list[str]:
    """The order the decoders start in, so that the last to finish is a short one: those that run every suite in full
    (the correct decoder, the controls) first, then the mutants whose suite is the sampling one (their first catch
    comes after some of the family is computed), then the rest; the given order within each."""
    from harness.subjects.decoder_registry import MUTANT_PREFIX
    from harness.subjects.mutant_decoders import TARGET_SUITE

    def rank(decoder: str) -> int:
        if not stops_at_first_catch(decoder, full_table):
            return 0
        return 1 if TARGET_SUITE.get(decoder.removeprefix(MUTANT_PREFIX)) == "sampling" else 2

    return sorted(decoders, key=rank)


def catalogue_table(
    runs: Sequence[DecoderRun], suites: Sequence[str], elapsed_s: float, full_table: bool = False
) -> dict:
    """The report's `mutants` section: mutant x suite, the score over mutants expected to be caught, and
    whether the correct decoder and the exact controls passed every suite."""
    from harness.subjects.decoder_registry import MUTANT_PREFIX
    from harness.subjects.mutant_decoders import EXPECTED_VERDICT, MUTANTS

    rows, correct = [], None
    for run in runs:
        if run.decoder == CORRECT_DECODER:
            correct = run
            continue
        name = run.decoder.removeprefix(MUTANT_PREFIX)
        caught = any(cell.status == "caught" for cell in run.cells.values())
        expected = EXPECTED_VERDICT.get(name, "caught")
        rows.append(
            {
                "mutant": name,
                "models": first_sentence(MUTANTS[name].__doc__ if name in MUTANTS else ""),
                "expected": expected,
                "cells": {suite: run.cells[suite].status for suite in suites},
                "caught": caught,
                "as_expected": caught if expected == "caught" else not caught,
                "first_failure": {suite: run.cells[suite].first_failure for suite in suites},
                "elapsed_s": round(run.elapsed_s, 1),
            }
        )
    scored = [row for row in rows if row["expected"] == "caught"]
    return {
        "mode": "full table" if full_table else "first catch",
        "suites": list(suites),
        "rows": rows,
        "score": sum(row["caught"] for row in scored) / len(scored) if scored else float("nan"),
        "caught": sum(row["caught"] for row in scored),
        "scored": len(scored),
        "correct_decoder": {suite: correct.cells[suite].status for suite in suites} if correct else {},
        "correct_passes": correct is not None and all(c.status == "passed" for c in correct.cells.values()),
        "controls_pass": all(row["as_expected"] for row in rows if row["expected"] != "caught"),
        "elapsed_s": round(elapsed_s, 1),
        "runs": [asdict(run) for run in runs],
        "efficiency": None,
    }


def first_sentence(text: str | None) -> str:
    """The first sentence of a docstring, on one line."""
    flat = " ".join((text or "").split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def format_table(table: dict) -> str:
    """The one-screen mutant x suite table."""
    suites = table["suites"]
    width = max([len(row["mutant"]) for row in table["rows"]] + [len(CORRECT_DECODER) + 12])
    lines = [f"{'decoder':<{width}}  " + "".join(f"{suite:>12}" for suite in suites) + f"{'expected':>18}"]
    if table["correct_decoder"]:
        cells = "".join(f"{table['correct_decoder'][suite]:>12}" for suite in suites)
        lines.append(f"{CORRECT_DECODER + ' (correct)':<{width}}  {cells}{'pass everything':>18}")
    for row in table["rows"]:
        mark = "" if row["as_expected"] else "   <-- UNEXPECTED"
        cells = "".join(f"{row['cells'][suite]:>12}" for suite in suites)
        lines.append(f"{row['mutant']:<{width}}  {cells}{row['expected']:>18}{mark}")
    lines.append(
        f"[{table['mode']}] mutation score {table['caught']}/{table['scored']} = {table['score']:.0%} "
        f"(mutants expected to be caught); correct decoder passes everything: {table['correct_passes']}; "
        f"controls as expected: {table['controls_pass']}; {table['elapsed_s']:.0f}s"
    )
    return "\n".join(lines)


def catalogue_cases(table: dict, model: str) -> list[dict]:
    """One report case per decoder: passed when the suites did with it what its category expects."""
    cases = []
    if table["correct_decoder"]:
        cells = table["correct_decoder"]
        failed = [suite for suite, status in cells.items() if status != "passed"]
        cases.append(_case(CORRECT_DECODER, model, not failed, f"failed suites: {', '.join(failed)}" if failed else ""))
    for row in table["rows"]:
        message = (
            ""
            if row["as_expected"]
            else (
                f"expected {row['expected']}; "
                + ", ".join(f"{suite} {status}" for suite, status in row["cells"].items())
            )
        )
        cases.append(_case("mutant:" + row["mutant"], model, row["as_expected"], message))
    return cases


def _case(decoder: str, model: str, passed: bool, message: str) -> dict:
    return {
        "nodeid": f"mutants::{decoder}",
        "suite": "mutants",
        "case": decoder,
        "decoder": decoder,
        "model": model,
        "params": {},
        "outcome": "passed" if passed else "failed",
        "duration_s": 0.0,
        "message": message,
        "divergence": None,
        "sampling": None,
        "invariants": None,
    }
