"""The wheel's copy of the suites' pytest settings (harness/suites.ini, used by an installed harness) says
what the clone's pyproject.toml says: an installed run and a clone run apply the same settings. And every file the
harness package reads that is not a Python module (templates, llama.cpp's patches, ...) is declared package data,
so an installed harness has it."""

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


def test_every_data_file_of_the_harness_package_is_declared_package_data():
    settings = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]
    declared = settings["package-data"]
    undeclared = []
    for path in PACKAGE_DIR.rglob("*"):
        if not path.is_file() or path.suffix in {".py", ".pyc"} or "__pycache__" in path.parts:
            continue
        package_dir = path.parent
        while not (package_dir / "__init__.py").is_file():
            package_dir = package_dir.parent
        package = ".".join(package_dir.relative_to(PACKAGE_DIR.parent).parts)
        relative = path.relative_to(package_dir)
        if not any(relative.match(pattern) for pattern in declared.get(package, [])):
            undeclared.append(str(path.relative_to(PACKAGE_DIR.parent)))
    assert not undeclared, f"files of the harness package no wheel would hold: {undeclared}"
