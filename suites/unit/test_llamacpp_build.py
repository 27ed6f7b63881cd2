"""llama.cpp built from its source with the harness's instrumentation (harness/subjects/engines/llamacpp/build.py)
against the published wheel it was built from: the instrumentation compiled in must change nothing for a request that
forces nothing.

On each GGUF fixture, the greedy suite's unforced requests (every prompt fixture with its own max_new_tokens and the
checkpoint's EOS, at k = 1..4, as the greedy identity tests send them) are decoded by both builds: the tokens, the
finish reasons and every verification pass (its drafts, the count accepted, the tokens it emitted) must be equal, the
build's passes read from its responses, the wheel's from its trace log. The requests clear of the context end go as
one batch; those that reach it, one at a time: in a batch, a slot drafting past its context end fails llama.cpp's
batched draft decode (`llama_process[i] returned 1`, common/speculative.cpp), and the other slots drafting in that
step lose their drafts, so which passes they make depends on the threads' timing, in either build. Then a request with
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
from pathlib import Path

import pytest

from harness.checks.batches import at_context_end
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


def batches(bundle, requests):
    """The requests clear of the context end as one batch, then each request that reaches it alone."""

    def at_end(request):
        return at_context_end(
            len(request.prompt_ids), request.max_new_tokens, request.num_draft_tokens, bundle.max_context
        )

    return [[r for r in requests if not at_end(r)], *([r] for r in requests if at_end(r))]


def decode_in(decoder, batches):
    return [result for batch in batches for result in decoder.decode(batch)]


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_the_build_decodes_every_unforced_request_as_the_wheel_does(both_builds, k):
    bundle, built, wheel = both_builds
    layout = batches(bundle, unforced_requests(bundle, k))
    ours, theirs = decode_in(built, layout), decode_in(wheel, layout)
    drafted = sum(len(step.drafts) for result in theirs for step in result.steps)
    assert drafted > 0, "the wheel drafted nothing: nothing was compared"
    for index, (mine, shipped) in enumerate(zip(ours, theirs, strict=True)):
        assert mine.token_ids == shipped.token_ids, f"request {index}: the tokens differ"
        assert mine.finish_reason == shipped.finish_reason, f"request {index}: the finish reasons differ"
        assert mine.steps == shipped.steps, f"request {index}: the verification passes differ"


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


MUTANT = Path(__file__).parents[2] / "harness/subjects/engines/llamacpp/patches/mutant-forced-draft-not-applied.patch"
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
