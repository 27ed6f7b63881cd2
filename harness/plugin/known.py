"""Known engine bugs, kept visible and unable to hide a new one.

At collection, a test that a recorded finding of the engine under test makes fail (harness/subjects/engines/findings.py)
is watched by that finding; a finding whose fix the engine runs with (--engine-fixes) watches nothing. When a
watched test's call fails, the findings' signatures judge the failure from its records and message:
- explained by one or more: an expected failure (xfailed), whose failure message and records are kept and whose
  `known` record names the findings and why;
- explained by none: a failure, with a section naming each watching finding it was not explained by;
- an error in set-up or tear-down, and an engine that did not start or stopped answering (EngineUnavailable, in
  set-up or in the call), is never a finding: nothing the engine computed was seen, whatever its log says.
A watched test that passes fails: the engine no longer shows the bug, and its entry must go (strict); unless part of
its check did not run (an `unjudged` record: draft conformance under --reference engine, which loads no weights),
when the pass says nothing of the bug.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from harness.contract.paths import resolve_model_path
from harness.contract.records import RECORD_PREFIX, KnownRecord, attach_record
from harness.plugin.session import run_options
from harness.subjects.engines.abilities import PinnedInProcess
from harness.subjects.engines.environments import flavour_of
from harness.subjects.engines.findings import FailedCase, Finding, explaining, known_failures, suite_relative
from harness.subjects.engines.registry import engine_of_decoder

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle

WATCHED = pytest.StashKey[tuple[Finding, ...]]()
MAY_FAIL = pytest.StashKey[bool]()  # every watching finding fails it only when its random draws reach the bug


def watch(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stash on each item the findings that make it fail for this decoder, engine version and model."""
    options = run_options(config)
    engine = engine_of_decoder(options.decoder, options.engine.version, any_release=True)
    if engine is None or not engine.findings:
        return
    flavour = flavour_of(options.device)
    in_process = options.engine.version is None and engine.ability(PinnedInProcess) is not None
    # the harness's own release of an engine that runs in its process (transformers) is its pinned one
    version = (
        engine.environment.flavour(flavour).version
        if in_process
        else engine.environment.installed_version(flavour, options.engine.version)
    )
    model = resolve_model_path(options.model).name
    fixed = frozenset(options.engine.fixes)
    for item in items:
        found = known_failures(
            engine.findings, options.decoder, version, flavour, model, item.nodeid, fixed, options.engine.runner
        )
        if found:
            item.stash[WATCHED] = tuple(found)
            test_id = suite_relative(item.nodeid)
            item.stash[MAY_FAIL] = all(finding.may(model, test_id) for finding in found)


def judge(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """Turn a watched test's call report into an expected failure, a named failure, or a strict XPASS failure."""
    watched = item.stash.get(WATCHED, ())
    if not watched or report.when != "call" or report.skipped:
        return
    slugs = ", ".join(f.slug for f in watched)
    if report.passed:
        if item.stash.get(MAY_FAIL, False):  # random draws that missed the bug: no XPASS
            return
        if "unjudged" in attached_records(report):  # the part of the check that shows the bug did not run here
            return
        report.outcome = "failed"
        report.longrepr = (
            f"[XPASS(strict)] watched by {slugs}, yet it passed: the engine no longer shows the bug here. Remove the "
            "test from the finding's `failing` list (harness/subjects/engines/<engine>/findings.py)."
        )
        return
    from harness.subjects.engines.process import EngineUnavailable  # imports torch: only once a watched test failed

    if call.excinfo is not None and call.excinfo.errisinstance(EngineUnavailable):
        section = f"not explained by {slugs}: an engine that did not start or stopped answering is never a finding"
        add_section(report, section)
        return
    case = FailedCase(
        nodeid=item.nodeid,
        message=call.excinfo.exconly() if call.excinfo is not None else report.longreprtext,
        records=attached_records(report),
        watched_by=tuple(f.slug for f in watched),
        model=lambda: model_under_test(item.config),
    )
    explained, failed_signatures = explaining(watched, case)
    if explained:
        explanation = "; ".join(f"{f.slug}: {f.signature}" for f in explained)
        record = KnownRecord(findings=[f.slug for f in explained], explanation=explanation)
        attach_record(lambda name, value: report.user_properties.append((name, value)), "known", record)
        report.outcome = "skipped"
        report.wasxfail = "known: " + ", ".join(f.slug for f in explained)
        return
    lines = [f"not explained by {f.slug}: its signature is {f.signature}" for f in watched]
    lines += [f"{slug}: its signature could not read the failure: {error}" for slug, error in failed_signatures]
    add_section(report, "\n".join(lines))


def add_section(report: pytest.TestReport, text: str) -> None:
    """Say in a failed report why no known finding explains it."""
    if hasattr(report.longrepr, "addsection"):
        report.longrepr.addsection("mtp-harness: known findings", text)
    else:
        report.longrepr = f"{report.longrepr}\n{text}"


def attached_records(report: pytest.TestReport) -> dict[str, object]:
    """The records the test attached (harness.contract.records.attach_record), by kind."""
    return {
        name.removeprefix(RECORD_PREFIX): json.loads(value) if isinstance(value, str) else value
        for name, value in report.user_properties
        if name.startswith(RECORD_PREFIX)
    }


def model_under_test(config: pytest.Config) -> ModelBundle:
    """The session's model as the suites hold it: under --reference engine its card (no weights: a signature reads
    its config, never the checkpoint's weights, which the engine process alone reads)."""
    from harness.contract.run_options import Reference
    from harness.models.card import model_of_run

    options = run_options(config)
    weights = options.reference is not Reference.ENGINE
    return model_of_run(options.model, options.device, options.dtype, weights)  # type: ignore[return-value]
