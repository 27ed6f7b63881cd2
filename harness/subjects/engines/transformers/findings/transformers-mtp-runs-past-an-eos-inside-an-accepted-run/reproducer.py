"""transformers' MTP generation in 5.15.1 does not stop at an EOS that an accepted draft brings in the middle of a
verification pass: the pass's later tokens are kept and generation goes on, where generation without MTP stops.

Root cause (transformers 5.15.1): MTPCandidateGenerator.get_candidates (generation/candidate_generator.py:1455) drafts
past an EOS; `_assisted_decoding` (generation/utils.py) crops the tokens a pass accepts at the length budget only
(:3781-3785: "A partial acceptance plus the correction/bonus token can overshoot the length budget"), and its EOS
criterion (stopping_criteria.py, EosTokenCriteria) reads only the sequence's last token, so an EOS followed in the
same pass by another token is never seen. 5.16.1 crops the draft after its first EOS (candidate_generator.py:1544
there: "Crop the draft after the first EOS, otherwise the target model may accept eos and the rest as valid"); 5.18.0
also crops the accepted tokens at the first EOS in `_assisted_decoding`.

Standalone: transformers and torch alone (the Python of a transformers release's environment), no harness import:

    python reproducer.py [MODEL_DIRECTORY]

(default: the mtp-harness fixture fixtures/models/tiny-deepseek-v3 beside this folder). It decodes one prompt
greedily without MTP, then takes each of its first output tokens that does not occur earlier (nor in the prompt) as
the EOS id, with and without `use_mtp=True`. Prints BUG REPRODUCED and exits 1 when, for some EOS, generation without
MTP ends at it and with MTP goes on past it; `not reproduced`, exit 0, when MTP ends wherever the plain generation
ends. A release without MTP generation, or whose MTP generation cannot load the checkpoint, gives no verdict.
"""

import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mtp_model.py, shared by the transformers findings
import mtp_model

MODEL = mtp_model.model_directory()
PROMPT = [1, 5, 9, 13]
LENGTH = 16

model = mtp_model.load_mtp_model(MODEL)


def generate(eos: int | None, **options: object) -> list[int]:
    ids = torch.tensor([PROMPT])
    ends = {"eos_token_id": eos, "pad_token_id": eos} if eos is not None else {"eos_token_id": None}
    output = model.generate(ids, max_new_tokens=LENGTH, do_sample=False, **ends, **options)
    return output[0, ids.shape[1] :].tolist()


plain = generate(None)
print(f"transformers {transformers.__version__}, greedy without MTP and no EOS: {plain}")
missed = []
for position in range(1, 10):
    eos = plain[position]
    if eos in plain[:position] or eos in PROMPT:
        continue  # the EOS must first come at this very position
    without, with_mtp = generate(eos), generate(eos, use_mtp=True)
    print(f"  EOS {eos} at output position {position}: {len(without)} tokens without MTP, {len(with_mtp)} with MTP")
    if len(without) == position + 1 and len(with_mtp) > position + 1 and with_mtp[position] == eos:
        missed.append(position)
if missed:
    print(f"BUG REPRODUCED: with use_mtp=True generation went on past the EOS at output positions {missed}")
    sys.exit(1)
print("not reproduced: with use_mtp=True generation ended at every EOS where it ended without MTP")
