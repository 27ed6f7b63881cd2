"""The pytest side: the plugin (entry point `pytest11: mtp_harness`), the run recorder that writes
results.json and the report, and the quiet progress of `mtp-harness run`.

The plugin is this package: pytest finds its hooks and fixtures as the names below. options.py declares the
options and markers; session.py sets a session up (seed, threads, Hypothesis profile, recorder);
collection.py selects and marks tests; cases.py handles each case's report; minimal.py shrinks failure
groups at the end; fixtures.py holds the fixtures; recorder.py and progress.py are plugins of their own.

Imports: every subpackage but harness.commands; nothing outside the pytest side imports it.
"""

from harness.plugin.cases import pytest_runtest_makereport, pytest_runtest_setup
from harness.plugin.collection import pytest_collection_modifyitems, pytest_generate_tests
from harness.plugin.fixtures import bundle, decoder, harness_seed, prompts, require, test_seed
from harness.plugin.minimal import pytest_sessionfinish
from harness.plugin.options import pytest_addoption
from harness.plugin.session import (
    pytest_configure,
    pytest_configure_node,
    pytest_load_initial_conftests,
    pytest_report_header,
)

__all__ = [
    "bundle",
    "decoder",
    "harness_seed",
    "prompts",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_load_initial_conftests",
    "pytest_report_header",
    "pytest_runtest_makereport",
    "pytest_runtest_setup",
    "pytest_sessionfinish",
    "require",
    "test_seed",
]
