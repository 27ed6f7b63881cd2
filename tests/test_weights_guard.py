"""The promise of --reference engine: the harness process reads no weight file (harness/models/weights_guard.py).
Each check runs in a fresh Python process, as the guard is for a whole process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from harness.contract.paths import DATA_ROOT, FIXTURE_MODELS
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM

pytest_plugins = ["pytester"]

MODEL = FIXTURE_MODELS / "tiny-mimo"
ENGINES = VLLM.home(VLLM.flavour("cpu")).parent  # where the engine environments live (pytester's HOME has none)


def guarded(body: str) -> subprocess.CompletedProcess:
    """Run `body` in a fresh process after forbid_weight_files; the last line it prints is its verdict."""
    script = textwrap.dedent(f"""
        from harness.models.weights_guard import forbid_weight_files
        forbid_weight_files("under test")
        MODEL = {str(MODEL)!r}
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=DATA_ROOT)


WAYS = {
    "load_bundle": "from harness.models.loading import load_bundle; load_bundle(MODEL)",
    "the harness's safetensors index": "from harness.models.checkpoint import open_checkpoint; "
    "from pathlib import Path; open_checkpoint(Path(MODEL))",
    "safetensors.safe_open": "import safetensors; safetensors.safe_open(MODEL + '/model.safetensors', 'pt')",
    "safetensors.torch.load_file": "import safetensors.torch; safetensors.torch.load_file(MODEL + '/model.safetensors')",
    "torch.load": "import torch; torch.load(MODEL + '/model.safetensors')",
    "open()": "open(MODEL + '/model.safetensors', 'rb').read(8)",
    "transformers": "import transformers; transformers.AutoModelForCausalLM.from_pretrained(MODEL)",
}
PRELUDE = "from harness.contract.errors import WeightFileOpened\n"


def test_every_way_of_reading_weights_is_refused_under_the_guard():
    """One guarded process tries every way in turn; each must raise WeightFileOpened (a read, or any other error,
    is printed as such)."""
    body = PRELUDE + "import json\nverdicts = {}\n"
    for way, expression in WAYS.items():
        body += (
            f"try:\n    {expression}\nexcept WeightFileOpened as error:\n    verdicts[{way!r}] = 'refused: ' + str(error)\n"
            f"except Exception as error:\n    verdicts[{way!r}] = f'{{type(error).__name__}}: {{error}}'\n"
            f"else:\n    verdicts[{way!r}] = 'read'\n"
        )
    done = guarded(body + "print(json.dumps(verdicts))")
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(verdicts) == set(WAYS)
    for way, verdict in verdicts.items():
        assert verdict.startswith("refused: the harness process tried to read"), (way, verdict)


def test_the_guard_lets_the_card_load_and_refuses_nothing_else():
    done = guarded(
        PRELUDE
        + """
from harness.models.card import load_card
card = load_card(MODEL)
open(MODEL + "/config.json").read()
print(card.vocab_size, card.max_context, list(card.eos_token_ids))
"""
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1024", "256", "[0]"], done.stdout


def test_without_the_guard_the_same_reads_work():
    script = "from harness.models.loading import load_bundle; print(load_bundle(" + repr(str(MODEL)) + ").vocab_size)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr[-2000:]


PLUGIN_CASES = """
import pytest

def test_the_card_serves_what_needs_no_weights(bundle):
    assert not bundle.has_weights and bundle.vocab_size > 0 and bundle.tokenizer is not None

def test_the_precise_model_needs_weights(rescoring_bundle):
    pass

def test_the_target_needs_weights(bundle):
    bundle.target

def test_reading_a_weight_file_by_hand_fails(bundle):
    open(bundle.path / "model.safetensors", "rb").read(8)
"""


@pytest.mark.skipif(
    VLLM.installed_version("cpu") is None,
    reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
)
def test_under_reference_engine_the_checks_that_need_weights_are_skipped_by_name_and_a_read_fails(
    pytester, monkeypatch
):
    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(ENGINES))
    pytester.makepyfile(test_reference=PLUGIN_CASES)
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {str(DATA_ROOT)!r})\nfrom suites.conftest import rescoring_bundle"
    )
    result = pytester.runpytest_subprocess(
        "--harness-decoder=vllm-mtp",
        "--harness-model=tiny-mimo",
        "--harness-reference=engine",
        "-rs",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, skipped=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*reference engine*",
            "*WeightFileOpened: the harness process tried to read*model.safetensors*",
            "*needs the precise float64 re-scoring of the checkpoint*(--reference harness runs it)*",
            "*needs the target model of tiny-mimo*(--reference harness runs it)*",
        ]
    )
