"""Where the suites, fixtures and reports live, in a clone and in an installed wheel.

A clone (installed editable) keeps the top-level `suites/` and `fixtures/` folders; a wheel carries the same
files as `harness/suites` and `harness/fixtures` (package data, see pyproject.toml). Reports go to
`./reports/` of the directory a command runs in, unless --report-dir says otherwise.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the harness package
INSTALLED = (PACKAGE_DIR / "suites").is_dir()  # a wheel: the suites are the package's own data
DATA_ROOT = PACKAGE_DIR if INSTALLED else PACKAGE_DIR.parent  # the folder holding suites/ and fixtures/
REPO_ROOT: Path | None = None if INSTALLED else PACKAGE_DIR.parent  # the clone, where there is one
SUITES_DIR = DATA_ROOT / "suites"
FIXTURES = DATA_ROOT / "fixtures"
FIXTURE_MODELS = FIXTURES / "models"
GOLDEN = FIXTURES / "golden"
DEFAULT_PROMPTS = FIXTURES / "prompts.json"
DEFAULT_MODEL = FIXTURE_MODELS / "tiny-deepseek-v3"
# pytest's settings for the suites: the clone's pyproject.toml, or the copy of its [tool.pytest.ini_options]
# that the wheel carries (tests/test_packaging.py keeps the two equal)
PYTEST_CONFIG = PACKAGE_DIR / "suites.ini" if INSTALLED else PACKAGE_DIR.parent / "pyproject.toml"
PACKAGED_PYTEST_CONFIG = PACKAGE_DIR / "suites.ini"
REPORTS = Path("reports")  # relative: the directory a command runs in


def suite_of(nodeid: str) -> str:
    """The suite a test belongs to: its directory under suites/ (greedy, sampling, ...), else its top directory."""
    parts = nodeid.split("::")[0].split("/")
    folders = parts[:-2]  # a suite is a folder under suites/ that holds the test file
    if SUITES_DIR.name in folders:
        last = len(folders) - 1 - folders[::-1].index(SUITES_DIR.name)
        return parts[last + 1]
    return parts[0]


def suite_of_junit(classname: str) -> str:
    """The suite of a JUnit testcase classname (the test module's dotted path: suites.greedy.test_x)."""
    return suite_of(classname.replace(".", "/"))


def resolve_model_path(model: str) -> Path:
    """A bundled fixture name ('tiny-mimo') or a directory path."""
    fixture = FIXTURE_MODELS / model
    return fixture if "/" not in model and fixture.is_dir() else Path(model)
