"""llama.cpp built from its source with the harness's instrumentation (harness/subjects/engines/llamacpp/build.py)
against the published wheel it was built from: the instrumentation compiled in must change nothing for a request that
forces nothing.

On each GGUF fixture, the greedy suite's unforced requests at k = 1..4, laid out as its tests send them, are decoded
by both builds: every prompt fixture alone with its own max_new_tokens and the checkpoint's EOS (natural drafts), the
prompts clear of the context end as one batch, every prompt in one batch (mixed) and those at the context end in one,
and the boundary prompts with max_new_tokens 1..k + 2 (outputs cut by length). The tokens and finish reasons must be
equal everywhere, and every verification pass (its drafts, the count accepted, the tokens it emitted) wherever the
wheel's passes are its own to repeat: the build's passes read from its responses, the wheel's from its trace log. Not
in a batch holding a request at the context end: there a slot drafting past its context end fails llama.cpp's batched
draft decode (`llama_process[i] returned 1`, common/speculative.cpp; docs/findings/llamacpp-draft-mtp-drafts-past-
the-slots-limit.md), and the other slots drafting in that step lose their drafts, so which passes they make depends
on the threads' timing, in either build. Then a request with
a forced draft shows the build proposes the forced token wherever it drafts that position, and the target rejects
it. Last, the instrumentation's own mutant (the forced draft not applied) built in with --engine-patch: a greedy
slice that passes on the build fails there.

Needs both llama.cpp environments and the mutant's build (`mtp-harness engine install llama.cpp`, `... --build` and
`... --build --patch harness/subjects/engines/llamacpp/patches/mutant-forced-draft-not-applied.patch`; .ci/run
installs all three)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.checks.batches import AT_CONTEXT_END, CLEAR_OF_CONTEXT_END, MIXED, at_context_end
from harness.contract.decoder import DecodeRequest
from harness.contract.run_options import EngineOptions
from harness.models.loading import bundle_for
from harness.models.prompts import load_prompts
from harness.subjects.engines.llamacpp import ENGINE
from harness.subjects.engines.llamacpp.build import build_spec, built_python
from harness.subjects.engines.llamacpp.environment import SOURCE, WHEEL

GGUF_FIXTURES = ("tiny-deepseek-v3", "tiny-glm4-moe", "tiny-qwen3-next")
K_VALUES = (1, 2, 3, 4)

pytestmark = [
    pytest.mark.xdist_group("llamacpp"),
    pytest.mark.skipif(
        ENGINE.environment.installed_version("cpu") is None or built_python(build_spec()) is None,
        reason="needs the xllamacpp wheel and llama.cpp built from source: run `mtp-harness engine install llama.cpp` "
        "and `mtp-harness engine install llama.cpp --build` (.ci/run does)",
    ),
]


@pytest.fixture(scope="module", params=GGUF_FIXTURES)
def both_builds(request):
    bundle = bundle_for(request.param, "cpu", "float32")
    built = ENGINE.build("llamacpp-mtp", bundle, EngineOptions(runner=SOURCE))
    wheel = ENGINE.build("llamacpp-mtp", bundle, EngineOptions(runner=WHEEL))
    yield bundle, built, wheel
    built.close()
    wheel.close()


def unforced_requests(bundle, k):
    return [
        DecodeRequest(
            tuple(prompt.encode(bundle.tokenizer)),
            prompt.max_new_tokens,
            num_draft_tokens=k,
            eos_token_ids=bundle.eos_token_ids,
        )
        for prompt in load_prompts()
    ]


BOUNDARY_PROMPTS = ("natural-01", "code-02", "repetitive-01")  # suites/greedy/test_eos_and_length.py


def layouts(bundle, k) -> dict[str, tuple[list[list[DecodeRequest]], bool]]:
    """The greedy suite's unforced layouts at k: name -> (batches in order, whether the passes must be equal)."""
    requests = unforced_requests(bundle, k)

    def at_end(request):
        return at_context_end(len(request.prompt_ids), request.max_new_tokens, k, bundle.max_context)

    lengths = [
        replace(request, max_new_tokens=n)
        for prompt, request in zip(load_prompts(), requests, strict=True)
        if prompt.id in BOUNDARY_PROMPTS
        for n in range(1, k + 3)
    ]
    at_the_end = [r for r in requests if at_end(r)]
    return {
        "alone": ([[r] for r in requests], True),
        CLEAR_OF_CONTEXT_END: ([[r for r in requests if not at_end(r)]], True),
        MIXED: ([requests], not at_the_end),
        AT_CONTEXT_END: ([at_the_end] if at_the_end else [], False),
        "max_new_tokens 1..k+2": ([[r] for r in lengths], True),
    }


def decode_in(decoder, batches):
    return [result for batch in batches for result in decoder.decode(batch)]


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_the_build_decodes_every_unforced_request_as_the_wheel_does(both_builds, k):
    bundle, built, wheel = both_builds
    compared_passes = 0
    for layout, (batches, passes_repeat) in layouts(bundle, k).items():
        ours, theirs = decode_in(built, batches), decode_in(wheel, batches)
        for index, (mine, shipped) in enumerate(zip(ours, theirs, strict=True)):
            where = f"{layout}, request {index}"
            assert mine.token_ids == shipped.token_ids, f"{where}: the tokens differ"
            assert mine.finish_reason == shipped.finish_reason, f"{where}: the finish reasons differ"
            if passes_repeat:
                assert mine.steps == shipped.steps, f"{where}: the verification passes differ"
                compared_passes += sum(len(step.drafts) > 0 for step in shipped.steps)
    assert compared_passes > 0, "the wheel drafted nothing: no pass was compared"


def test_a_forced_draft_is_proposed_by_the_build_and_rejected_by_the_target(both_builds):
    bundle, built, _ = both_builds
    [natural] = built.decode(unforced_requests(bundle, 2)[:1])
    # the first output position a pass drafts, after the first: the passes before it do not change when it is forced
    position = next(s.start + 1 for s in natural.steps if len(s.drafts) >= 2)
    wrong = next(t for t in range(bundle.vocab_size) if t != natural.token_ids[position])
    request = unforced_requests(bundle, 2)[0]
    request = DecodeRequest(
        request.prompt_ids, request.max_new_tokens, num_draft_tokens=2, eos_token_ids=request.eos_token_ids,
        forced_drafts={position: wrong},
    )  # fmt: skip
    [forced] = built.decode([request])
    assert forced.token_ids == natural.token_ids, "a rejected forced draft changed the greedy output"
    drafting = [s for s in forced.steps if s.start <= position < s.start + len(s.drafts)]
    assert drafting, f"no pass drafted output position {position}"
    for step in drafting:
        assert step.drafts[position - step.start] == wrong, "the forced token was not proposed at its position"
        assert step.accepted <= position - step.start, "the target accepted the forced (wrong) draft"


MUTANT = Path(__file__).parents[1] / "harness/subjects/engines/llamacpp/patches/mutant-forced-draft-not-applied.patch"
SLICE = "natural-01 and k2 and (every-position-separated or last-draft-index-separated)"


def greedy_slice(tmp_path: Path, *options: str) -> dict:
    """The greedy slice on llamacpp-mtp (tiny-glm4-moe), run as a user runs it; its results.json and exit status."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy", "--decoder", "llamacpp-mtp"]
    command += ["--model", "tiny-glm4-moe", "-n", "0", "--report-dir", str(tmp_path), *options, "--", "-k", SLICE]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    [results] = [json.loads(path.read_text()) for path in tmp_path.glob("*/results.json")]
    return results | {"exit_status": done.returncode, "log": done.stdout[-3000:]}


@pytest.mark.skipif(
    built_python(build_spec(user=[MUTANT])) is None,
    reason="the build with the mutant is not built: mtp-harness engine install llama.cpp --build --patch "
    + str(MUTANT),
)
def test_forced_rejections_pass_on_the_build_and_catch_its_instrumentation_forcing_nothing(tmp_path):
    """The instrumentation's own mutant (patches/mutant-forced-draft-not-applied.patch: the drafter keeps its token
    where a forced one is named) built in with --engine-patch: the same slice that passes on the build fails, and the
    pass records show where."""
    built = greedy_slice(tmp_path / "built")
    assert built["exit_status"] == 0, built["log"]
    assert [case["outcome"] for case in built["cases"]] == ["passed", "passed"]
    assert [p["role"] for p in built["run"]["engine_build"]["build"]["patches"]] == ["instrumentation"]
    broken = greedy_slice(tmp_path / "mutant", "--engine-patch", str(MUTANT))
    assert broken["exit_status"] == 1, broken["log"]
    assert [case["outcome"] for case in broken["cases"]] == ["failed", "failed"]
    assert [p["role"] for p in broken["run"]["engine_build"]["build"]["patches"]] == ["instrumentation", "user"]


def test_a_patch_that_does_not_apply_stops_the_build_at_its_step_and_leaves_no_environment(tmp_path, monkeypatch):
    from harness.subjects.engines.environments import EngineEnvironmentError
    from harness.subjects.engines.llamacpp.build import build

    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(tmp_path / "engines"))
    stale = tmp_path / "stale.patch"
    stale.write_text(
        "--- a/common/speculative.cpp\n+++ b/common/speculative.cpp\n@@ -1,1 +1,1 @@\n-no such line\n+any line\n"
    )
    spec = build_spec(user=[stale])
    with pytest.raises(
        EngineEnvironmentError, match=r"failed at the patches step: patch stale.patch \(user\) does not"
    ):
        build(spec, log=lambda line: None)
    assert not spec.home.exists() and not list((tmp_path / "engines").glob("*")), "a failed build left an environment"
