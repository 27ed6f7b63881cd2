"""`--dist loadgroup` keeps an `xdist_group` on one worker: the sampling family, the vLLM engine process and
the installed-wheel environment are shared by their group's tests. pytest 9.2 stopped honouring the node-id
suffix pytest-xdist 3.8 uses for groups, silently (pytest-dev/pytest-xdist#1386), hence the pin
pytest < 9.2 in pyproject.toml; this test fails if a pytest/xdist pair breaks grouping again."""

from __future__ import annotations

import re

pytest_plugins = ["pytester"]


def test_a_group_runs_on_one_worker(pytester):
    pytester.makepyfile(
        test_grouped="""
        import os
        import pytest

        pytestmark = pytest.mark.xdist_group("one")


        @pytest.mark.parametrize("i", range(6))
        def test_case(i, record_property):
            record_property("worker", os.environ["PYTEST_XDIST_WORKER"])
        """
    )
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", f"--junitxml={junit}"
    )
    result.assert_outcomes(passed=6)
    workers = set(re.findall(r'name="worker" value="(gw\d+)"', junit.read_text()))
    assert len(workers) == 1, f"the group's tests ran on {sorted(workers)}"
