"""Engine environments at any release, side by side (`mtp-harness engine install NAME --version X`, `engine list`,
`engine remove`): each release in its own folder with its install time and size, a release that does not exist or
does not import stopped with one line naming it, and no half environment left behind. Hermetic: pip reads only a
folder of wheels made here (PIP_NO_INDEX), and the environments go under tmp_path (MTP_HARNESS_ENGINES)."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile

import pytest

from harness.commands.cli import main
from harness.subjects.engines.environments import (
    EngineEnvironment,
    EngineEnvironmentError,
    Flavour,
    install,
    installed_environments,
    remove,
)
from harness.subjects.engines.llamacpp.environment import ENVIRONMENT as LLAMACPP

FAKE = EngineEnvironment(
    name="fake-engine",
    flavours=(Flavour("cpu", "fake-engine", "1.0"),),
    probe="import fake_engine",
    module="fake_engine",
)


def wheel(folder, version, source, name="fake-engine"):
    """A wheel of the distribution `name` at `version` whose module (the name with _) is `source`."""
    module = name.replace("-", "_")
    files = {
        f"{module}/__init__.py": source,
        f"{module}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{module}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record_name = f"{module}-{version}.dist-info/RECORD"
    lines = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(text.encode())}")
    files[record_name] = "\n".join([*lines, f"{record_name},,"]) + "\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


@pytest.fixture
def index(tmp_path, monkeypatch):
    """pip sees only tmp_path/wheels: fake-engine 1.0 and 2.0 import, 3.0 installs but fails to import."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels, "1.0", "__version__ = '1.0'\n")
    wheel(wheels, "2.0", "__version__ = '2.0'\n")
    wheel(wheels, "3.0", "raise ImportError('this release is broken')\n")
    wheel(wheels, "1.0", "", name="fake-helper")  # what the harness's code running beside an engine imports
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(tmp_path / "engines"))
    return tmp_path / "engines"


def test_releases_install_side_by_side_with_their_time_and_size_and_are_removed_one_by_one(index):
    first = install(FAKE, "cpu", log=lambda line: None)
    second = install(FAKE, "cpu", log=lambda line: None, version="2.0")
    assert first.parent.parent.name == "fake-engine-cpu-1.0" and second.parent.parent.name == "fake-engine-cpu-2.0"
    listed = {info["version"]: info for info in installed_environments()}
    assert set(listed) == {"1.0", "2.0"}
    for info in listed.values():
        assert info["install_seconds"] > 0 and info["size_bytes"] > 1_000_000  # a virtual environment with pip
        assert info["requirement"] == f"fake-engine=={info['version']}"
    assert install(FAKE, "cpu", log=lambda line: None, version="2.0") == second  # idempotent
    remove(FAKE, "cpu", "2.0")
    assert [info["version"] for info in installed_environments()] == ["1.0"]
    with pytest.raises(EngineEnvironmentError, match=r"no fake-engine cpu environment at version 2\.0"):
        remove(FAKE, "cpu", "2.0")


def test_an_environment_holds_what_the_harness_s_code_there_imports_and_its_probe_proves_it(index):
    """`after`: installed beside the engine (the transformers server imports the harness's package, which imports
    llguidance); the probe imports it, so an environment without it is rebuilt, and one that cannot have it is
    refused with the line that says why."""
    needs_helper = EngineEnvironment(
        name="fake-engine",
        flavours=(Flavour("cpu", "fake-engine", "1.0", after=("fake-helper==1.0",)),),
        probe="import fake_engine, fake_helper",
        module="fake_engine",
    )
    python = install(needs_helper, "cpu", log=lambda line: None)
    info = json.loads((python.parent.parent / "engine.json").read_text())
    assert info["after"] == ["fake-helper==1.0"] and info["version"] == "1.0"
    without = EngineEnvironment(
        "fake-engine", (Flavour("cpu", "fake-engine", "2.0"),), needs_helper.probe, "fake_engine"
    )
    with pytest.raises(
        EngineEnvironmentError, match=r"does not import as the harness runs it: .*No module named 'fake_helper'"
    ):
        install(without, "cpu", log=lambda line: None, version="2.0")
    assert not (index / "fake-engine-cpu-2.0").exists()


def test_a_release_that_does_not_exist_stops_with_one_line_and_leaves_nothing(index):
    with pytest.raises(EngineEnvironmentError) as error:
        install(FAKE, "cpu", log=lambda line: None, version="9.9")
    assert str(error.value) == "fake-engine has no release 9.9 on the package index (fake-engine==9.9)"
    assert not (index / "fake-engine-cpu-9.9").exists()


def test_a_release_that_does_not_import_leaves_no_half_environment(index):
    with pytest.raises(EngineEnvironmentError, match="was installed but does not import"):
        install(FAKE, "cpu", log=lambda line: None, version="3.0")
    assert not (index / "fake-engine-cpu-3.0").exists()
    assert installed_environments() == []


@pytest.mark.parametrize("version", ["0.31.0; rm -rf /", "../0.31.0", "--pre", "latest", ""])
def test_a_version_that_is_no_release_number_is_refused_at_the_door(version, index, capsys):
    with pytest.raises(EngineEnvironmentError, match="is not a release number"):
        FAKE.flavour("cpu", version)
    assert main(["engine", "install", "vllm", f"--version={version}"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("mtp-harness engine: engine version") and "is not a release number" in line
    assert not index.exists()


def test_engine_list_shows_each_release_and_remove_names_what_it_removed(index, capsys):
    install(FAKE, "cpu", log=lambda line: None, version="2.0")
    home = index / "fake-engine-cpu-2.0"
    info = json.loads((home / "engine.json").read_text())
    assert main(["engine", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["engine", "flavour", "version", "from"]
    [row] = out[1:]
    assert row.split()[:4] == ["fake-engine", "cpu", "2.0", "its"] and row.endswith(str(home))
    assert f"{info['size_bytes'] / 2**30:.2f} GiB" in row
    assert main(["engine", "remove", "vllm"]) == 1  # remove needs --version
    assert "needs --version" in capsys.readouterr().err


@pytest.fixture
def other_llamacpp_release(tmp_path, monkeypatch):
    """An environment of llama.cpp at 2026.9.11063 as `engine install --version` leaves it, its Python a stand-in
    that answers the version query (nothing here starts an engine)."""
    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(tmp_path / "engines"))
    monkeypatch.delenv("MTP_HARNESS_LLAMACPP_PYTHON", raising=False)
    home = tmp_path / "engines" / "llama.cpp-cpu-2026.9.11063"
    (home / "bin").mkdir(parents=True)
    python = home / "bin" / "python"
    python.write_text("#!/bin/sh\necho 2026.9.11063\n")
    python.chmod(0o755)
    (home / "engine.json").write_text(json.dumps({"engine": "llama.cpp", "flavour": "cpu", "version": "2026.9.11063"}))
    return "2026.9.11063"


def run_options(**options):
    from harness.door import RUN, read_run_options

    given = {name.replace("_", "-"): value for name, value in options.items()}
    return read_run_options({"decoder": "llamacpp-mtp", "model": "tiny-glm4-moe", **given}, RUN)


def test_a_run_on_another_release_runs_it_as_shipped_from_its_published_package(other_llamacpp_release):
    options = run_options(engine_version=other_llamacpp_release)
    assert options.engine.version == other_llamacpp_release and options.engine.runner == "wheel"
    from harness.contract.run_options import RunOptions, pytest_arguments

    assert "--harness-engine-version=2026.9.11063" in pytest_arguments(options)
    assert RunOptions.from_record(options.to_record()) == options


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"engine_version": "2026.8.10566"},
            "--engine-version 2026.8.10566: the llama.cpp cpu environment of that "
            "release is not installed; run `mtp-harness engine install llama.cpp --flavour cpu --version 2026.8.10566`",
        ),
        (
            {"engine_version": "2026.9.11063", "engine_fixes": "all"},
            "--engine-fixes all: the findings' fixes are written for llama.cpp's pinned release; run --engine-version "
            "2026.9.11063 as shipped",
        ),
        (
            {"engine_version": "2026.9.11063", "engine_runner": "source"},
            "--engine-runner source: llama.cpp's source runner builds the pinned release's source; another release "
            "runs wheel",
        ),
        ({"engine_version": "latest"}, "--engine-version latest: engine version 'latest' is not a release number"),
    ],
)
def test_a_release_that_cannot_run_stops_at_the_door_naming_it(other_llamacpp_release, options, message):
    from harness.door import UsageError

    with pytest.raises(UsageError) as error:
        run_options(**options)
    assert str(error.value).startswith(message)


def test_a_release_for_a_decoder_that_is_no_engine_is_refused(other_llamacpp_release):
    from harness.door import RUN, UsageError, read_run_options

    with pytest.raises(UsageError, match=r"--engine-version 2026\.9\.11063: decoder 'mtp' is not an engine"):
        read_run_options({"decoder": "mtp", "engine-version": "2026.9.11063"}, RUN)


@pytest.mark.skipif(
    LLAMACPP.installed_version("cpu") is None,
    reason="the llama.cpp environment is not installed: run `mtp-harness engine install llama.cpp` (.ci/run does)",
)
def test_the_pinned_release_named_is_the_pinned_run():
    from harness.subjects.engines.llamacpp.environment import VERSION

    assert run_options(engine_version=VERSION) == run_options()
