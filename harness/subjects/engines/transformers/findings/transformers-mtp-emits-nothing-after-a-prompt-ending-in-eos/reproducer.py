"""transformers' MTP generation before 5.18.0 returns no token for a prompt that ends with an EOS id, where
generation without MTP decodes it.

Root cause (transformers 5.15.1 to 5.17.0): in `_assisted_decoding` (generation/utils.py, 5.17.0) the first pass of
MTP generation has no drafts (MTPCandidateGenerator returns the prompt as the candidate), yet
`is_done_candidate = stopping_criteria(candidate_input_ids, None)` (:3857) asks the stopping criteria of that
candidate, the prompt itself, whose last token is an EOS; then `if is_done_candidate and n_matches ==
candidate_length: n_matches -= 1` (:3938-3939) takes n_matches from 0 to -1, and `selected_tokens[:, : n_matches + 1]`
keeps nothing: the sequence still ends with the prompt's EOS, and generation stops with no new token. 5.18.0 removes
`is_done_candidate` and crops the accepted tokens at an EOS instead.

Standalone: transformers and torch alone (the Python of a transformers release's environment), no harness import:

    python reproducer.py [MODEL_DIRECTORY]

(default: the mtp-harness fixture fixtures/models/tiny-deepseek-v3 beside this folder). It decodes a prompt whose
last token is the request's EOS id, with and without `use_mtp=True`. Prints BUG REPRODUCED and exits 1 when
generation without MTP returns tokens and with MTP none; `not reproduced`, exit 0, when MTP returns what generation
without MTP returns. A release without MTP generation, or whose MTP generation cannot load the checkpoint, gives no
verdict.
"""

import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mtp_model.py, shared by the transformers findings
import mtp_model

MODEL = mtp_model.model_directory()
PROMPT = [1, 5, 9, 13]
EOS = PROMPT[-1]  # the prompt ends with the request's EOS id

model = mtp_model.load_mtp_model(MODEL)


def generate(**options: object) -> list[int]:
    ids = torch.tensor([PROMPT])
    output = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=EOS, pad_token_id=EOS, **options)
    return output[0, ids.shape[1] :].tolist()


without, with_mtp = generate(), generate(use_mtp=True)
print(f"transformers {transformers.__version__}, prompt {PROMPT} with EOS id {EOS}:")
print(f"  without MTP: {without}")
print(f"  use_mtp=True: {with_mtp}")
if without and not with_mtp:
    print("BUG REPRODUCED: with use_mtp=True generation returned no token for a prompt ending with the EOS id")
    sys.exit(1)
if with_mtp == without:
    print("not reproduced: with use_mtp=True generation returned what it returns without MTP")
    sys.exit(0)
sys.exit(f"no verdict: the outputs differ otherwise ({without} against {with_mtp})")
