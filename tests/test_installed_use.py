"""Use from another repository: the harness's wheel and an example engine package (fixtures/example-engine,
its decoders registered under the entry-point group mtp_harness.decoders) installed into a fresh virtual
environment in a temporary directory outside the clone, and run from there three ways: the CLI against the
entry-point decoder, pytest collecting the packaged suites, and a user test file using harness.testing.
Each gives the verdict a run from the clone gives, case by case; the deliberately broken example decoder
fails all three. Also: `mtp-harness mutants --json` writes the JSON document alone to stdout.

Slow (a fresh environment: about a minute of pip from this machine's package index and cache), so the
tests share one installation and one pytest-xdist worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path

import pytest

from harness.contract.paths import REPO_ROOT
from harness.testing import check_id

pytestmark = [
    pytest.mark.xdist_group("installed-wheel"),
    pytest.mark.skipif(REPO_ROOT is None, reason="builds the wheel from a clone"),
]

# 8 greedy cases of one prompt, each a request decoded alone: natural drafts and max_new_tokens at every value up
# to k + 2, at k = 1..4 (the broken decoder fails them: its commits differ wherever a draft is rejected). What is
# compared is the verdict, case by case; the forced-rejection schedules decode whole batches of prompts and are the
# greedy suite's own business.
SELECTION = "natural-01 and (natural_drafts or max_new_tokens)"
DECODERS = {"correct": "example-engine", "broken": "example-engine-broken"}
CLONE_DECODERS = {
    "correct": "example_engine.harness_glue:make_decoder",
    "broken": "example_engine.harness_glue:make_broken_decoder",
}
# one torch thread per child process: the tests run beside other pytest-xdist workers
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
EXAMPLE_ENGINE = Path(__file__).resolve().parents[1] / "fixtures" / "example-engine"


@dataclass(frozen=True)
class Installation:
    venv: Path
    workdir: Path
    wheel: Path

    def run(self, *command: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        """A command of the fresh environment, from the work directory, with nothing of the clone's."""
        environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
        environment |= ONE_THREAD
        environment["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{environment.get('PATH', '')}"
        return subprocess.run(
            command, cwd=cwd or self.workdir, env=environment, capture_output=True, text=True, timeout=900
        )


def tracked_files(root: Path) -> list[str]:
    """The files git would put in a clean clone of the working tree (tracked and new, never ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def copy_tree(root: Path, names: list[str], destination: Path) -> None:
    for name in names:
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, destination / name)


def constraints_of_this_environment(path: Path) -> Path:
    """name==version of every distribution here: the fresh environment resolves to the same versions (and to
    this machine's CPU torch, never a newer CUDA build)."""
    pins = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in distributions()
        if d.metadata["Name"] and d.metadata["Name"].lower() not in ("mtp-harness", "example-engine")
    )
    path.write_text("\n".join(pins) + "\n")
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installation:
    base = tmp_path_factory.mktemp("installed-use")
    source, dist, work = base / "source", base / "dist", base / "work"
    copy_tree(REPO_ROOT, tracked_files(REPO_ROOT), source)
    work.mkdir()
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist)]
    subprocess.run([*build, str(source)], check=True, capture_output=True, timeout=600)
    subprocess.run([*build, str(source / "fixtures" / "example-engine")], check=True, capture_output=True, timeout=600)
    [wheel] = dist.glob("mtp_harness-*.whl")
    [example] = dist.glob("example_engine-*.whl")
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    installation = Installation(base / "venv", work, wheel)
    constraints = constraints_of_this_environment(base / "constraints.txt")
    done = installation.run("python", "-m", "pip", "install", "-q", "-c", str(constraints), str(wheel), str(example))
    assert done.returncode == 0, done.stdout + done.stderr
    return installation


def outcomes(results_json: Path) -> dict[str, str]:
    """check id -> outcome, from a harness report's results.json."""
    cases = json.loads(results_json.read_text())["cases"]
    return {check_id(case["nodeid"]): case["outcome"] for case in cases}


def user_test_outcomes(results_json: Path) -> dict[str, str]:
    """check id -> outcome of a user's parametrize_with_checks cases (their id is the check id)."""
    cases = json.loads(results_json.read_text())["cases"]
    return {case["nodeid"].split("[", 1)[1][:-1]: case["outcome"] for case in cases}


@pytest.fixture(scope="module")
def clone_verdicts(tmp_path_factory) -> dict[str, tuple[int, dict[str, str]]]:
    """The same selection from the clone, with the example engine's glue imported by module:factory."""
    verdicts = {}
    for kind, decoder in CLONE_DECODERS.items():
        report = tmp_path_factory.mktemp(f"clone-{kind}")
        command = [
            sys.executable,
            "-m",
            "harness.commands.cli",
            "run",
            "--suite",
            "greedy",
            f"--decoder={decoder}",
            "-n",
            "0",
        ]
        environment = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(EXAMPLE_ENGINE)}
        done = subprocess.run(
            [*command, "--report-dir", str(report), "--", "-k", SELECTION],
            env=environment,
            capture_output=True,
            text=True,
            timeout=900,
        )
        [results] = report.glob("*/results.json")
        verdicts[kind] = (done.returncode, outcomes(results))
    assert verdicts["correct"][0] == 0 and set(verdicts["correct"][1].values()) == {"passed"}
    assert verdicts["broken"][0] == 1 and "failed" in verdicts["broken"][1].values()
    assert len(verdicts["correct"][1]) == 8
    return verdicts


def test_the_wheel_carries_the_suites_and_fixtures_and_not_the_unit_tests(installed):
    import zipfile

    names = zipfile.ZipFile(installed.wheel).namelist()
    assert "harness/suites/greedy/test_forced_rejections.py" in names and "harness/suites.ini" in names
    assert "harness/fixtures/models/tiny-deepseek-v3/model.safetensors" in names
    assert "harness/fixtures/prompts.json" in names and "harness/fixtures/golden/tiny-deepseek-v3.greedy.json" in names
    assert not [name for name in names if name.startswith("harness/tests/")]


@pytest.mark.parametrize("kind", DECODERS)
def test_the_cli_against_the_entry_point_decoder_gives_the_clones_verdict(installed, clone_verdicts, kind):
    report = installed.workdir / f"cli-{kind}"
    done = installed.run(
        "mtp-harness", "run", "--suite", "greedy", f"--decoder={DECODERS[kind]}", "-n", "0",
        "--report-dir", str(report), "--", "-k", SELECTION,
    )  # fmt: skip
    [results] = report.glob("*/results.json")
    assert (done.returncode, outcomes(results)) == clone_verdicts[kind], done.stdout[-3000:]
    assert "site-packages/harness/suites" in json.loads(results.read_text())["run"]["command"]


@pytest.mark.parametrize("kind", DECODERS)
def test_pytest_collecting_the_packaged_suites_gives_the_clones_verdict(installed, clone_verdicts, kind):
    report = installed.workdir / f"pyargs-{kind}"
    done = installed.run(
        "python", "-m", "pytest", "--pyargs", "harness.suites", "-m", "greedy", "-k", SELECTION,
        f"--harness-decoder={DECODERS[kind]}", f"--harness-report={report}", "-q", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert (done.returncode, outcomes(report / "results.json")) == clone_verdicts[kind], done.stdout[-3000:]


@pytest.mark.parametrize("kind", DECODERS)
def test_a_user_test_file_with_parametrize_with_checks_gives_the_clones_verdict(installed, clone_verdicts, kind):
    project = installed.workdir / f"api-{kind}"
    project.mkdir()
    (project / "test_engine.py").write_text(
        textwrap.dedent(
            f"""
            from harness.testing import parametrize_with_checks


            @parametrize_with_checks({DECODERS[kind]!r}, suites=["greedy"], select={SELECTION!r})
            def test_engine(check):
                check()
            """
        )
    )
    done = installed.run(
        "python", "-m", "pytest", "test_engine.py", "--harness-report=user-report", "-q", "-p", "no:cacheprovider",
        cwd=project,
    )  # fmt: skip
    verdict = (done.returncode, user_test_outcomes(project / "user-report" / "results.json"))
    assert verdict == clone_verdicts[kind], done.stdout[-3000:]
    assert len(list((project / "reports").glob("*-checks/index.html"))) == 1, "the harness's report of the checks"
    if kind == "broken":
        assert "DIVERGENCE at generated index" in done.stdout, "each case fails with the harness's own message"


def test_mutants_json_leaves_stdout_to_the_json_document(installed):
    done = installed.run(
        "mtp-harness", "mutants", "--json", "--suite", "invariants", "--mutant", "position-offset",
        "-k", "test_state_is_clean_after_every_pass_in_a_batch and k2", "--report-dir", str(installed.workdir / "mutants"),
    )  # fmt: skip
    table = json.loads(done.stdout)  # the whole of stdout, nothing before or after it
    assert done.returncode == 0 and table["score"] == 1.0, done.stderr[-3000:]
    assert "mtp-harness mutants: report" in done.stderr


def test_bench_runs_on_the_bundled_fixture_from_the_installed_wheel(installed):
    done = installed.run(
        "mtp-harness", "bench", "--requests", "8", "--transformers-requests", "1", "--dtype", "float64", "--json"
    )
    [result] = json.loads(done.stdout)
    assert done.returncode == 0 and result["model"] == "tiny-deepseek-v3" and result["mtp_requests"] == 8
