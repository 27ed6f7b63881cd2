"""Which tests run and how they are marked: slow tests deselected unless asked for, a test per prompt fixture,
and tests a recorded engine finding makes fail marked as strict xfails naming it (harness/subjects/findings.py)."""

from __future__ import annotations

import pytest

from harness.contract.paths import resolve_model_path
from harness.plugin.cases import CATCH_EXCEPTIONS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow are deselected unless --harness-slow is given or the -m expression names 'slow';
    tests a recorded engine finding makes fail are marked as strict xfails naming it (harness/subjects/findings.py)."""
    _mark_known_engine_failures(config, items)
    if config.getoption("--harness-slow") or "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def _mark_known_engine_failures(config: pytest.Config, items: list[pytest.Item]) -> None:
    from harness.subjects.engines.supported import engine_of_decoder
    from harness.subjects.findings import known_failures

    decoder = config.getoption("--decoder")
    engine = engine_of_decoder(decoder)
    if engine is None or not engine.findings:
        return
    flavour = "cuda" if str(config.getoption("--device")).startswith("cuda") else "cpu"
    version = engine.environment.installed_version(flavour)
    model = resolve_model_path(config.getoption("--model")).name
    for item in items:
        found = known_failures(engine.findings, decoder, version, flavour, model, item.nodeid)
        if found:
            from harness.subjects.engines.process import EngineError

            reason = "; ".join(f"{engine.environment.name} {version} bug, {f.document}: {f.title}" for f in found)
            raises = CATCH_EXCEPTIONS + ((EngineError,) if any(f.crashes for f in found) else ())
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=raises))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that take a `prompt` argument run once per prompt fixture, with the prompt id as test id."""
    if "prompt" in metafunc.fixturenames:
        from harness.models.prompts import load_prompts

        prompts = load_prompts(metafunc.config.getoption("--prompts"))
        metafunc.parametrize("prompt", prompts, ids=[p.id for p in prompts])
