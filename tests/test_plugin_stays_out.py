"""Installed, the pytest plugin stays out of other projects: a scratch project with its own `--device` option, its own
Hypothesis profile, a test marked `slow` and a fixture called `prompt` runs as it would without mtp-harness (nothing
deselected, nothing parametrized, its profile kept, no harness header), and the same project names a harness option
only to ask for the harness (harness/plugin/options.py harness_session)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CONFTEST = """
import pytest
from hypothesis import settings

settings.register_profile("scratch", max_examples=7)
settings.load_profile("scratch")


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="the scratch project's own device option")


@pytest.fixture
def prompt():
    return "the scratch project's own prompt"
"""
TESTS = """
import pytest
from hypothesis import settings


def test_its_own_device_option_is_its_own(pytestconfig):
    assert pytestconfig.getoption("--device") == "scratch-device"


@pytest.mark.slow
def test_marked_slow_runs():
    pass


def test_its_own_prompt_fixture(prompt):
    assert prompt == "the scratch project's own prompt"


def test_its_hypothesis_profile_is_kept():
    assert settings.default.max_examples == 7
"""


def run_scratch(tmp_path, *options: str) -> subprocess.CompletedProcess:
    project = tmp_path / "scratch"
    project.mkdir(exist_ok=True)
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "test_scratch.py").write_text(textwrap.dedent(TESTS))
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "MTP_HARNESS"))}
    environment.pop("PYTHONPATH", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--device", "scratch-device", *options]
    return subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True, timeout=300)


def test_a_scratch_project_runs_as_without_the_harness(tmp_path):
    done = run_scratch(tmp_path)
    assert "mtp_harness" in done.stdout or "mtp-harness" in done.stdout, "the plugin is installed and loaded"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 passed" in done.stdout and "deselected" not in done.stdout, done.stdout[-3000:]
    assert "mtp-harness: session seed" not in done.stdout, "no harness header in another project's session"


def test_the_harness_options_are_prefixed_in_the_scratch_projects_help(tmp_path):
    done = run_scratch(tmp_path, "--help")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split("mtp-harness: MTP decoding correctness:")[1].splitlines()[1:]
    group = lines[: next(i for i, line in enumerate(lines) if line and not line.startswith(" "))]
    options = [line.split()[0] for line in group if line.startswith("  --")]
    assert options and all(option.startswith("--harness-") for option in options), options


def test_a_harness_option_turns_the_harness_on_in_the_scratch_project(tmp_path):
    done = run_scratch(tmp_path, "--harness-budget=smoke")
    assert "mtp-harness: session seed" in done.stdout
    assert "1 deselected" in done.stdout, "the harness deselects slow tests unless asked"
