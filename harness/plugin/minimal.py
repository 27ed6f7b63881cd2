"""At session end, before the report is written: each failure group's smallest case shrunk to a minimal one
on the run's own decoder (harness/triage/minimal_cases.py), within --harness-shrink-seconds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.plugin.known import ENGINE_ARGS, ENGINE_FIXES, REFERENCE
from harness.plugin.options import resolved_dtype
from harness.subjects.engines.supported import ENGINE_REFERENCE

if TYPE_CHECKING:
    from harness.contract.decoder import Decoder
    from harness.models.loading import ModelBundle


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Before the report is written: shrink each failure group's smallest greedy case on the run's decoder."""
    config = session.config
    recorder = config.pluginmanager.get_plugin("mtp_harness_recorder")
    budget = float(config.getoption("--harness-shrink-seconds"))
    if recorder is None or budget <= 0 or config.stash[REFERENCE] == ENGINE_REFERENCE:
        return  # shrinking re-decodes target-only on the harness's copy: none under --reference engine
    from functools import cache

    from harness.triage.minimal_cases import GreedyOracle, InvariantOracle, Oracle, minimal_cases

    cases = recorder.finished_cases()
    groups = recorder.end()
    if not groups:
        return

    @cache
    def decoder_and_bundle() -> tuple[Decoder, ModelBundle]:
        from harness.models.loading import bundle_for
        from harness.subjects.registry import make_decoder

        model, device = config.getoption("--model"), config.getoption("--device")
        bundle = bundle_for(model, device, resolved_dtype(config))
        decoder = make_decoder(
            config.getoption("--decoder"), bundle, config.stash[ENGINE_FIXES], engine_args=config.stash[ENGINE_ARGS]
        )
        return decoder, bundle

    @cache
    def oracle_for(kind: str) -> Oracle:
        return {"greedy": GreedyOracle, "invariants": InvariantOracle}[kind](*decoder_and_bundle())

    try:
        recorder.minimal = minimal_cases(groups, {case["nodeid"]: case for case in cases}, oracle_for, budget)
    finally:
        if decoder_and_bundle.cache_info().currsize:  # an engine subject's processes stop here, not at exit
            close = getattr(decoder_and_bundle()[0], "close", None)
            if close is not None:
                close()
