"""Known engine findings mark exactly the tests they make fail, for the versions they were found in."""

from __future__ import annotations

from harness.subjects.engines.vllm_findings import VLLM_FINDINGS
from harness.subjects.findings import Finding, known_failures, suite_relative

FINDING = Finding(
    slug="x-bug",
    title="x",
    engine="x",
    decoders=("x-mtp",),
    versions=("1.0",),
    flavours=("cpu",),
    failing={"*": ("greedy/test_a.py::test_b[*-k2-*]",), "model-2": ("sampling/test_c.py::*",)},
    passing={"*": ("greedy/test_a.py::test_b[p9-k2-*]",)},
)


def ids(nodeid, decoder="x-mtp", version="1.0", flavour="cpu", model="model-1"):
    return [f.slug for f in known_failures([FINDING], decoder, version, flavour, model, nodeid)]


def test_a_finding_marks_the_tests_of_its_patterns_for_its_decoder_version_and_flavour():
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]") == ["x-bug"]
    assert ids("suites/greedy/test_a.py::test_b[p1-k3-final]") == []
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", version="1.1") == []
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", flavour="cuda") == []
    assert ids("suites/greedy/test_a.py::test_b[p1-k2-final]", decoder="x") == []


def test_brackets_in_test_ids_are_literal_and_listed_exceptions_pass():
    assert ids("suites/greedy/test_a.py::test_b[p9-k2-final]") == []
    assert ids("suites/greedy/test_a.py::test_bp1-k2-final]") == []


def test_a_finding_can_fail_more_tests_on_one_model():
    assert ids("suites/sampling/test_c.py::test_d[case]", model="model-2") == ["x-bug"]
    assert ids("suites/sampling/test_c.py::test_d[case]", model="model-1") == []


def test_node_ids_are_matched_wherever_the_suites_live():
    assert suite_relative("/site-packages/suites/greedy/test_a.py::t") == "greedy/test_a.py::t"


def test_every_vllm_finding_has_its_write_up_and_reproducer():
    from harness.contract.paths import REPO_ROOT

    for finding in VLLM_FINDINGS:
        document = REPO_ROOT / finding.document
        assert document.is_file(), f"{finding.slug}: no {finding.document}"
        assert (REPO_ROOT / finding.document.replace(".md", ".py")).is_file(), f"{finding.slug}: no reproducer"
        text = document.read_text()
        assert "## Root cause" in text and "## Reproducer (vLLM alone)" in text and finding.versions[0] in text
