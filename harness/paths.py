"""Where the repository's fixtures and suites live (the harness runs from a clone, installed editable)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_MODELS = REPO_ROOT / "fixtures" / "models"
DEFAULT_PROMPTS = REPO_ROOT / "fixtures" / "prompts.json"
DEFAULT_MODEL = FIXTURE_MODELS / "tiny-deepseek-v3"
SUITES = REPO_ROOT / "suites"
REPORTS = REPO_ROOT / "reports"


def suite_of(nodeid: str) -> str:
    """The suite a test belongs to: its directory under suites/ (greedy, sampling, ...), else its top directory."""
    parts = nodeid.split("::")[0].split("/")
    if SUITES.name in parts[:-2]:
        return parts[parts.index(SUITES.name) + 1]
    return parts[0]


def suite_of_junit(classname: str) -> str:
    """The suite of a JUnit testcase classname (the test module's dotted path: suites.greedy.test_x)."""
    return suite_of(classname.replace(".", "/"))
