"""A tokenizer as llguidance reads it (each token's bytes, the EOS), to compile structured-output constraints into
token masks (harness/decoding/grammar.py)."""

from __future__ import annotations

import llguidance
import llguidance.hf
from transformers import PreTrainedTokenizerBase


def grammar_tokenizer(tokenizer: PreTrainedTokenizerBase, vocab_size: int) -> llguidance.LLTokenizer:
    """llguidance's view of `tokenizer` over the model's vocab_size ids (ids past the tokenizer's: never allowed)."""
    return llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
