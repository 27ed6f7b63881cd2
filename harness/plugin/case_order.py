"""The costliest cases first (loaded with `-p harness.plugin.case_order` by `mtp-harness run`): the cases are ordered by
their expected cost (case_costs.py), so that the workers start the long ones first and the run does not end with one
worker on a long case while the other idles.

Cases are moved in units that stay together, in pytest's order: the cases of an xdist group (one worker runs them),
and the cases of a module. Within a module, pytest's order is what its fixtures and the harness's caches are built
for: cases sharing a prompt and k run one after the other and reuse what the first computed (measured: the default
run's greedy cases, ordered one by one by cost, took 0.1-3 s each instead of 3 ms). Units go in order of their total
cost, the costliest first. Every worker collects and orders the same cases the same way (pytest-xdist checks the
collections are equal), and `mtp-harness run` passes `--no-loadscope-reorder` so the scheduler keeps this order
instead of its own (units by number of cases).
"""

from __future__ import annotations

import pytest

from harness.plugin.case_costs import case_costs, durations_before, function_priors_for, run_kind
from harness.plugin.session import RUN_OPTIONS, run_options


def unit_of(item: pytest.Item) -> str:
    """The unit an item moves with: its xdist group, else its module."""
    group = item.get_closest_marker("xdist_group")
    if group is not None:
        return f"group:{group.args[0] if group.args else group.kwargs.get('name')}"
    return f"module:{item.nodeid.split('::', 1)[0]}"


def costliest_first(items: list[pytest.Item], costs: dict[str, float]) -> list[pytest.Item]:
    """The items, units in order of their total cost (costliest first, ties in pytest's order), each unit's items in
    pytest's order."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(unit_of(item), []).append(item)
    ranked = sorted(units.values(), key=lambda unit: -sum(costs[item.nodeid] for item in unit))
    return [item for unit in ranked for item in unit]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = costliest_first(items, expected_costs(config, [item.nodeid for item in items]))


def expected_costs(config: pytest.Config, nodeids: list[str]) -> dict[str, float]:
    """nodeid -> expected seconds (case_costs.case_costs): the last run of this run's kind in its report directory,
    and the function priors where they are of this run's kind; in a session without the harness's options (this
    plugin alone), the last run of any kind and the suites' priors."""
    return case_costs(*cost_sources(config, nodeids))


def cost_sources(config: pytest.Config, nodeids: list[str]) -> tuple[list[str], dict[str, float], dict[str, float]]:
    """(nodeids, the last run's durations, the priors) that case_costs and unmeasured read: the last run of this
    run's kind in its report directory, and the function priors where they are of this run's kind; in a session
    without the harness's options (this plugin alone), the last run of any kind and no priors."""
    options = run_options(config) if RUN_OPTIONS in config.stash else None
    kind = None if options is None else run_kind(options)
    known = durations_before(config.getoption("harness_report", None), nodeids, kind)
    return nodeids, known, {} if options is None else function_priors_for(options)
