"""Which tests run and how they are marked: slow tests deselected unless asked for, a test per prompt fixture,
and the tests a recorded engine finding makes fail watched by it (harness/plugin/known.py)."""

from __future__ import annotations

import pytest

from harness.plugin.known import watch
from harness.plugin.session import run_options


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow are deselected unless --harness-slow is given or the -m expression names 'slow';
    the tests a recorded engine finding makes fail are watched by it (harness/plugin/known.py)."""
    watch(config, items)
    if config.getoption("--harness-slow") or "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that take a `prompt` argument run once per prompt fixture, with the prompt id as test id."""
    if "prompt" in metafunc.fixturenames:
        from harness.models.prompts import load_prompts

        prompts = load_prompts(run_options(metafunc.config).prompts)
        metafunc.parametrize("prompt", prompts, ids=[p.id for p in prompts])
