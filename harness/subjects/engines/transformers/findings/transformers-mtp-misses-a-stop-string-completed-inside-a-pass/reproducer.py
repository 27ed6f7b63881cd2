"""transformers' MTP generation misses a stop string completed by a token that is not the last one its verification
pass emits: the output runs on past it, where generation without MTP stops.

Root cause (transformers 5.25.0, the harness's own release; the same code in every release with MTP generation,
measured below): `_assisted_decoding` (generation/utils.py) crops the tokens a pass accepts at an EOS and at the
length budget only (:4155-4170, its own comment: "we should technically crop based on other stopping criteria as
well in all generality, not only EOS and Length"), then asks the stopping criteria once, of the whole sequence
(:4251); StopStringCriteria (generation/stopping_criteria.py) matches a stop string only where it ends the sequence.
A stop completed by an accepted draft, with the pass's next token after it, no longer ends the sequence.

Standalone: transformers and torch alone (the Python of a transformers release's environment, or the harness's), no
harness import:

    python reproducer.py [MODEL_DIRECTORY]

(default: the mtp-harness fixture fixtures/models/tiny-deepseek-v3 beside this folder: a DeepSeek-V3 layout with 2
MTP depths). It decodes one prompt greedily without MTP, then, for each of its first output tokens whose text does not
occur earlier, asks for that text as a stop string with and without `use_mtp=True` (greedy: the outputs are the same
tokens). Prints BUG REPRODUCED and exits 1 when, for some stop, generation without MTP stops at the stop's token and
with MTP runs on past it; `not reproduced`, exit 0, when MTP stops wherever the plain generation stops. A release
without MTP generation, or one whose MTP generation cannot load the checkpoint, gives no verdict.
"""

import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mtp_model.py, shared by the transformers findings
import mtp_model

MODEL = mtp_model.model_directory()
PROMPT = torch.tensor([[1, 5, 9, 13]])
LENGTH = 16

tokenizer = AutoTokenizer.from_pretrained(MODEL)
model = mtp_model.load_mtp_model(MODEL)


def generate(**options: object) -> list[int]:
    output = model.generate(PROMPT, max_new_tokens=LENGTH, do_sample=False, tokenizer=tokenizer, **options)
    return output[0, PROMPT.shape[1] :].tolist()


plain = generate()
print(f"transformers {transformers.__version__}, greedy without MTP: {plain}")
missed = []
for position in range(1, 10):
    stop = tokenizer.decode(plain[position])
    if not stop.strip() or stop in tokenizer.decode(plain[:position]):
        continue  # the stop must first complete at this very token
    without, with_mtp = generate(stop_strings=[stop]), generate(stop_strings=[stop], use_mtp=True)
    print(
        f"  stop {stop!r} completes at output position {position}: {len(without)} tokens without MTP, "
        f"{len(with_mtp)} with use_mtp=True"
    )
    if len(without) == position + 1 and len(with_mtp) > position + 1:
        missed.append(position)
if missed:
    print(f"BUG REPRODUCED: with use_mtp=True generation ran past the stop string at output positions {missed}")
    sys.exit(1)
print("not reproduced: with use_mtp=True generation stopped wherever it stopped without MTP")
