"""transformers' MTP generation builds the MTP layer of a DeepSeek-V3 / GLM-4.5 checkpoint with a dense MLP where the
checkpoint's (every such checkpoint's) is a mixture of experts, and stops: `generate(use_mtp=True)` raises
"The following MtpModel weights are missing ...: ['layers.0.mtp_block.mlp.down_proj.weight', ...]".

Root cause (transformers 5.14.0 to 5.15.0): `MtpModel.__init__` (modeling_layers.py) builds each MTP layer as the
model's own decoder layer class with the layer index 0 of `config.get_mtp_config()` (MtpLayer: `decoder_layer_cls(
config, layer_idx)`); DeepSeek-V3's and GLM-4.5's decoder layer picks a dense MLP for `layer_idx <
first_k_dense_replace` (modeling_deepseek_v3.py:484-487, 5.14.1), and get_mtp_config (configuration_utils.py:1356-1393,
5.14.1) keeps the target's first_k_dense_replace (1 in this checkpoint, 3 in DeepSeek-V3's). 5.15.1 sets it to 0 there
("MTP layers always use MoE", configuration_utils.py:1416-1418).

Standalone: transformers and torch alone (the Python of a transformers release's environment: `mtp-harness engine
install transformers --version X`), no harness import:

    python reproducer.py [MODEL_DIRECTORY]

(default: the mtp-harness fixture fixtures/models/tiny-deepseek-v3 beside this folder: a DeepSeek-V3 layout, 2
layers, first_k_dense_replace 1, 2 MTP depths, each a mixture of experts). Prints BUG REPRODUCED and exits 1 when
generate(use_mtp=True) stops on the dense MLP's weights missing; `not reproduced`, exit 0, when it decodes. A release
without MTP generation (no MTPCandidateGenerator) gives no verdict.
"""

import sys
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mtp_model.py, shared by the transformers findings
import mtp_model

MODEL = mtp_model.model_directory()
PROMPT = torch.tensor([[1, 5, 9, 13]])

model = mtp_model.load_mtp_model(MODEL)
text = model.config.get_text_config()
dense = getattr(model.config.get_mtp_config(), "first_k_dense_replace", 0)
print(
    f"transformers {transformers.__version__}: the checkpoint's first_k_dense_replace is "
    f"{text.first_k_dense_replace}; get_mtp_config() gives the MTP layers {dense}, so MTP layer 0 is built "
    f"{'dense' if dense > 0 else 'as a mixture of experts'}"
)
try:
    drafted = model.generate(PROMPT, use_mtp=True, max_new_tokens=8, do_sample=False)
except RuntimeError as error:
    if "MtpModel weights are missing" not in str(error) or ".mtp_block.mlp." not in str(error):
        raise
    print(f"  {error}")
    print("BUG REPRODUCED: generate(use_mtp=True) built the MoE MTP layer with a dense MLP and found no weights for it")
    sys.exit(1)
plain = model.generate(PROMPT, max_new_tokens=8, do_sample=False)
print(f"  use_mtp: {drafted[0, PROMPT.shape[1] :].tolist()}; without: {plain[0, PROMPT.shape[1] :].tolist()}")
print("not reproduced: generate(use_mtp=True) loaded the MoE MTP layers and decoded")
