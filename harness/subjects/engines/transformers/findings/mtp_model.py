"""What every transformers reproducer here shares: the checkpoint loaded by transformers alone, set up so that
`generate(use_mtp=True)` finds its MTP layers. transformers and torch alone: this file imports nothing of the harness.

    python <reproducer>.py [MODEL_DIR]

(default: the mtp-harness fixture fixtures/models/tiny-deepseek-v3: a DeepSeek-V3 layout with 2 MTP depths). A
release without MTP generation (no MTPCandidateGenerator, before 5.14) gives no verdict.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, PreTrainedModel

FIXTURE = Path(__file__).resolve().parents[5] / "fixtures" / "models" / "tiny-deepseek-v3"


def model_directory() -> Path:
    """The model directory given on the command line, else the fixture."""
    return Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE


def load_mtp_model(directory: Path) -> PreTrainedModel:
    """The checkpoint in float32, its MTP layers where transformers' MTP generation looks for them; exits without a
    verdict on a release that has no MTP generation."""
    try:
        from transformers.generation.candidate_generator import MTPCandidateGenerator  # noqa: F401
    except ImportError:
        sys.exit(f"transformers {transformers.__version__} has no MTP generation (no MTPCandidateGenerator)")
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    text = model.config.get_text_config()
    # transformers looks for DeepSeek-V3 MTP weights at layer 61 only; this checkpoint's follow its own layers
    model._keys_to_ignore_on_load_unexpected = [
        rf"model\.layers\.{text.num_hidden_layers + depth}\..*" for depth in range(text.num_mtp_layers)
    ]
    return model
