"""An engine is one package and one registry line: the toy engine (fixtures/toy-engine/: the harness's own decoder
behind the engine wire protocol, in a server process of its own, no real engine) joins the harness with its package
and the one entry-point line below, and every front end then knows it: the door, the plugin, the command line, the
report. A greedy slice through it passes, and fails once its bug is switched on (`--engine-arg corrupt_at=3`).

The same toy carries every option of a run but the reference (decoder, model, device, dtype, budget, seed, engine
configuration, fixes and arguments): the command a failure group prints, run as printed, replays the failure with
every one of them, and minimal-case shrinking runs the decoder under the run's own engine options. With the engine
as its own reference (`--reference engine`), which the toy does not offer, vLLM shows the same:
tests/test_vllm_failure_triage.py."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract.paths import DATA_ROOT
from harness.report.judgement import NOT_JUDGED_EXIT

TOY = DATA_ROOT / "fixtures" / "toy-engine" / "toy_engine"
REGISTRY_LINE = "toy = toy_engine:ENGINE"  # the entry point of the group mtp_harness.engines
SLICE = "natural-01 and k2 and (natural_drafts or every-position-separated or max_new_tokens)"
CORRUPTED_POSITION = 3
EVERY_OPTION = [
    "--decoder", "toy-mtp", "--model", "tiny-deepseek-v3", "--device", "cpu", "--dtype", "float32",
    "--budget", "smoke", "--harness-seed", "1234", "--engine-config", "one-at-a-time",
    "--engine-fixes", "all", "--engine-arg", f"corrupt_at={CORRUPTED_POSITION}",
]  # fmt: skip

pytestmark = pytest.mark.xdist_group("toy-engine")


@pytest.fixture(scope="module")
def toy_environment(tmp_path_factory) -> dict[str, str]:
    """The process environment of a machine where the toy engine is installed: its package, and a distribution that
    declares the one registry line (what `pip install fixtures/toy-engine` writes); its Python is the harness's own."""
    site = tmp_path_factory.mktemp("toy-site")
    shutil.copytree(TOY, site / "toy_engine", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "toy_engine-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-engine\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[mtp_harness.engines]\n{REGISTRY_LINE}\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return {**os.environ, **one_thread, "PYTHONPATH": path, "MTP_HARNESS_TOY_PYTHON": sys.executable}


def harness_run(environment: dict[str, str], report: Path, *options: str, selection: str = SLICE) -> dict:
    """`mtp-harness run --suite greedy` on the slice; its results.json."""
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy", "-n", "0"]
    command += [*options, "--report-dir", str(report), "--", "-k", selection]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=900, cwd=report.parent)
    found = sorted(report.glob("*/results.json"))
    assert found, f"no results.json:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(found[-1].read_text()) | {"exit_status": done.returncode, "log": done.stdout[-3000:]}


def outcomes(results: dict) -> dict[str, str]:
    return {case["nodeid"]: case["outcome"] for case in results["cases"]}


def test_the_toy_joins_the_registry_with_its_package_and_one_registry_line(toy_environment):
    probe = (
        "from harness.subjects.engines.registry import engine_of_decoder, engines\n"
        "from harness.subjects.decoder_registry import known_decoders\n"
        "engine = engine_of_decoder('toy-mtp')\n"
        "print(sorted(engines()), [d for d in known_decoders() if d.startswith('toy')], engine.version('cpu'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=toy_environment, capture_output=True, text=True)
    expected = "['llama.cpp', 'toy', 'transformers', 'vllm'] ['toy', 'toy-mtp'] 0.1.0"
    assert done.stdout.strip() == expected, done.stderr[-2000:]
    bare = subprocess.run([sys.executable, "-c", probe.replace("engine.version('cpu')", "0")], capture_output=True)
    assert b"'toy'" not in bare.stdout, "without its registry line the toy is unknown"


def test_a_greedy_slice_through_the_toy_passes_and_catches_its_bug(toy_environment, tmp_path):
    shipped = harness_run(toy_environment, tmp_path / "shipped", "--decoder", "toy-mtp", "--dtype", "float32")
    assert shipped["exit_status"] == 0, shipped["log"]
    assert len(outcomes(shipped)) == 3 and set(outcomes(shipped).values()) == {"passed"}
    assert shipped["run"]["engine"] == "toy 0.1.0 (cpu)"
    buggy = harness_run(
        toy_environment, tmp_path / "buggy", "--decoder", "toy-mtp", "--engine-arg", f"corrupt_at={CORRUPTED_POSITION}"
    )
    assert buggy["exit_status"] == 1, buggy["log"]
    failed = [case for case in buggy["cases"] if case["outcome"] == "failed"]
    assert len(failed) == 3 and {case["divergence"]["index"] for case in failed} == {CORRUPTED_POSITION}


@pytest.fixture(scope="module")
def failed_run(toy_environment, tmp_path_factory) -> dict:
    """A run with every option set, failing on the toy's bug, its failure groups shrunk (harness reference)."""
    results = harness_run(toy_environment, tmp_path_factory.mktemp("every-option") / "run", *EVERY_OPTION)
    assert results["exit_status"] == 1 and results["groups"], results["log"]
    return results


def replay(environment: dict[str, str], group: dict, report: Path) -> dict:
    """The group's printed command, run as printed (python: this interpreter), with a report directory added to
    read its outcome and options from."""
    command = shlex.split(group["rerun"])
    assert command[0] == "python"
    done = subprocess.run(
        [sys.executable, *command[1:], f"--harness-report={report}"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return json.loads((report / "results.json").read_text()) | {"exit_status": done.returncode, "log": done.stdout}


def test_a_failure_groups_command_replays_the_failure_with_every_option_of_the_run(
    failed_run, toy_environment, tmp_path
):
    group = failed_run["groups"][0]
    replayed = replay(toy_environment, group, tmp_path / "replay")
    assert replayed["exit_status"] == 1, replayed["log"][-3000:]
    assert replayed["run"]["options"] == failed_run["run"]["options"]
    options = replayed["run"]["options"]
    assert options["engine"] == {
        "configuration": "one-at-a-time",
        "fixes": ["toy-engine-reports-no-build"],
        "arguments": [["corrupt_at", CORRUPTED_POSITION]],
        "runner": None,  # the toy engine has one runner: none is asked for
        "patches": [],  # built from no source: no patch of the user's
        "version": None,  # the pinned release
    }
    assert (options["decoder"], options["dtype"], options["budget"], options["seed"]) == (
        "toy-mtp",
        "float32",
        "smoke",
        1234,
    )
    [case] = replayed["cases"]
    original = next(c for c in failed_run["cases"] if c["nodeid"] == group["smallest"])
    assert case["nodeid"] == original["nodeid"] and case["outcome"] == "failed"
    assert case["divergence"]["index"] == original["divergence"]["index"] == CORRUPTED_POSITION


def test_a_failure_group_shrinks_on_the_decoder_under_the_runs_engine_options(failed_run):
    minimal = failed_run["groups"][0]["minimal"]
    assert minimal["reproduced"], "shrunk without the run's engine argument, the bug does not show"
    assert minimal["server_config"]["one_at_a_time"] is True
    assert minimal["server_config"]["arguments"] == {"corrupt_at": CORRUPTED_POSITION}


# --- a finding added to the toy as one folder ----------------------------------------------------------------------

TOY_FINDING = "toy-corrupts-the-token-at-corrupt-at"
TOY_FINDING_FILES = {
    "finding.py": '''"""toy-corrupts-the-token-at-corrupt-at: under corrupt_at=3 the toy emits a wrong token at output position 3."""

from __future__ import annotations

from pathlib import Path

from harness.subjects.engines.findings import FailedCase, Finding


def wrong_token_at_position_3(case: FailedCase) -> bool:
    """A greedy divergence at output position 3, the decoder's token the reference's plus one, and nothing else."""
    divergence = case.records.get("divergence")
    return bool(divergence) and divergence["index"] == 3 and divergence["actual_token"] == divergence["expected_token"] + 1


FINDING = Finding(
    slug="toy-corrupts-the-token-at-corrupt-at",
    title="the toy emits a wrong token at output position corrupt_at",
    engine="toy",
    decoders=("toy-mtp",),
    found_in="0.1.0",
    flavours=("cpu",),
    failing={"*": ("greedy/*[natural-01-k2*",)},
    signature="a greedy divergence at output position 3 where the toy's token is the reference's plus one",
    explains=wrong_token_at_position_3,
    write_up=str(Path(__file__).with_name("write-up.md")),
)
''',
    "fix.py": '''"""Its fix, installed in the toy's process under --engine-fixes: the toy's bug module keeps the result as decoded."""

PATCHES = {"toy_engine.bug": lambda module: setattr(module, "corrupted", lambda result, at, vocab_size: result)}
''',
    "reproducer.py": '''"""The toy alone: natural-01's prompt decoded by the toy with corrupt_at=3, against target-only decoding."""

import sys

from harness.contract.decoder import DecodeRequest
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.prompts import load_prompts
from harness.subjects.engines.wire import request_message
from toy_engine.server import ToyEngine

config = {"model": sys.argv[1], "dtype": "float32", "num_draft_tokens": 2, "draft_mode": "greedy"}
engine = ToyEngine({**config, "arguments": {"corrupt_at": 3}})
request = DecodeRequest(tuple(load_prompts()[0].encode(engine.bundle.tokenizer)), 8, num_draft_tokens=2)
[toy] = engine.decode([request_message(request)])
[reference] = TargetOnlyDecoder(engine.bundle).decode([request])
if toy["token_ids"] != list(reference.token_ids):
    print("BUG REPRODUCED")
    sys.exit(1)
print("not reproduced")
''',
    "write-up.md": "# The toy emits a wrong token at output position corrupt_at\n\nA finding added to the toy as one folder.\n",
}


@pytest.fixture(scope="module")
def toy_with_a_finding(toy_environment, tmp_path_factory) -> dict[str, str]:
    """The toy's package with one more folder in its findings/, and nothing else changed."""
    site = tmp_path_factory.mktemp("toy-with-a-finding")
    shutil.copytree(Path(toy_environment["PYTHONPATH"].split(os.pathsep)[0]), site, dirs_exist_ok=True)
    folder = site / "toy_engine" / "findings" / TOY_FINDING
    folder.mkdir()
    for name, text in TOY_FINDING_FILES.items():
        (folder / name).write_text(text)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**toy_environment, "PYTHONPATH": path}


def test_a_finding_added_as_one_folder_is_watched_explained_and_fixed(toy_with_a_finding, tmp_path):
    bug = ("--decoder", "toy-mtp", "--dtype", "float32", "--engine-arg", f"corrupt_at={CORRUPTED_POSITION}")
    shipped = harness_run(toy_with_a_finding, tmp_path / "shipped", *bug)
    # every failure of the watched tests explained; none judged on its own merits, so the run says NOT JUDGED
    assert shipped["exit_status"] == NOT_JUDGED_EXIT, shipped["log"]
    assert set(outcomes(shipped).values()) == {"xfailed"} and len(outcomes(shipped)) == 3
    assert all(case["known"]["findings"] == [TOY_FINDING] for case in shipped["cases"])
    fixed = harness_run(toy_with_a_finding, tmp_path / "fixed", *bug, "--engine-fixes", TOY_FINDING)
    assert fixed["exit_status"] == 0 and set(outcomes(fixed).values()) == {"passed"}, fixed["log"]
    assert fixed["run"]["options"]["engine"]["fixes"] == [TOY_FINDING]
    other = harness_run(toy_with_a_finding, tmp_path / "other", "--decoder", "toy-mtp", "--engine-arg", "corrupt_at=2")
    assert other["exit_status"] == 1 and set(outcomes(other).values()) == {"failed"}, "another bug is not explained"
    reproducer = Path(toy_with_a_finding["PYTHONPATH"].split(os.pathsep)[0]) / "toy_engine/findings" / TOY_FINDING
    model = str(DATA_ROOT / "fixtures" / "models" / "tiny-deepseek-v3")
    command = [sys.executable, str(reproducer / "reproducer.py"), model]
    as_shipped = subprocess.run(command, env=toy_with_a_finding, capture_output=True, text=True, timeout=300)
    assert (as_shipped.returncode, as_shipped.stdout.strip()) == (1, "BUG REPRODUCED"), as_shipped.stderr[-2000:]
    with_fix = {**toy_with_a_finding, **fix_environment(toy_with_a_finding, TOY_FINDING)}
    fixed_run = subprocess.run(command, env=with_fix, capture_output=True, text=True, timeout=300)
    assert (fixed_run.returncode, fixed_run.stdout.strip()) == (0, "not reproduced"), fixed_run.stderr[-2000:]


def fix_environment(environment: dict[str, str], slug: str) -> dict[str, str]:
    """What --engine-fixes puts into the toy's process for `slug` (its FixesOnImport ability)."""
    probe = (
        "import json, toy_engine\n"
        "from harness.subjects.engines.abilities import FixesOnImport\n"
        f"print(json.dumps(toy_engine.ENGINE.ability(FixesOnImport).process_environment([{slug!r}])))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=environment, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)
