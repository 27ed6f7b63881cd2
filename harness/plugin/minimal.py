"""At session end, before the report is written: each failure group's smallest case shrunk to a minimal one
on the run's own decoder, under the run's own options (engine configuration, fixes and arguments included;
harness/triage/minimal_cases.py), within --harness-shrink-seconds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.contract.run_options import Reference
from harness.plugin.session import run_options

if TYPE_CHECKING:
    from harness.contract.decoder import Decoder
    from harness.models.loading import ModelBundle


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Before the report is written: shrink each failure group's smallest greedy case on the run's decoder."""
    config = session.config
    recorder = config.pluginmanager.get_plugin("mtp_harness_recorder")
    budget = float(config.getoption("--harness-shrink-seconds"))
    options = run_options(config)
    if recorder is None or budget <= 0 or options.reference is Reference.ENGINE:
        return  # shrinking re-decodes target-only on the harness's copy: none under --reference engine
    from functools import cache

    from harness.triage.minimal_cases import ORACLES, Oracle, minimal_cases

    cases = recorder.finished_cases()
    groups = recorder.end()
    if not groups:
        return

    @cache
    def decoder_and_bundle() -> tuple[Decoder, ModelBundle]:
        from harness.models.loading import bundle_for
        from harness.subjects.decoder_registry import make_decoder

        bundle = bundle_for(options.model, options.device, options.dtype)
        return make_decoder(options.decoder, bundle, options.engine), bundle

    @cache
    def oracle_for(kind: str) -> Oracle:
        return ORACLES[kind](*decoder_and_bundle())

    try:
        recorder.minimal = minimal_cases(groups, {case["nodeid"]: case for case in cases}, oracle_for, budget)
    finally:
        if decoder_and_bundle.cache_info().currsize:  # an engine subject's processes stop here, not at exit
            close = getattr(decoder_and_bundle()[0], "close", None)
            if close is not None:
                close()
