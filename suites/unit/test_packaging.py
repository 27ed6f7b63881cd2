"""The wheel's copy of the suites' pytest settings (harness/suites.ini, used by an installed harness) says
what the clone's pyproject.toml says: an installed run and a clone run apply the same settings."""

from __future__ import annotations

import configparser
import tomllib

from harness.contract.paths import PACKAGE_DIR

PYPROJECT = PACKAGE_DIR.parent / "pyproject.toml"


def test_the_packaged_pytest_settings_equal_the_clones():
    clone = tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]
    packaged = configparser.ConfigParser()
    packaged.read(PACKAGE_DIR / "suites.ini")
    settings = dict(packaged["pytest"])
    assert settings["addopts"] == clone["addopts"]
    assert settings["xfail_strict"] == str(clone["xfail_strict"]).lower()
    assert settings["junit_family"] == clone["junit_family"]
    assert settings["filterwarnings"].split("\n") == clone["filterwarnings"]
    assert set(settings) == set(clone) - {"testpaths"}, "a setting only one of the two has"
