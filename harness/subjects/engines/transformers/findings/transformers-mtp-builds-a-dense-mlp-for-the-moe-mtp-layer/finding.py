"""transformers-mtp-builds-a-dense-mlp-for-the-moe-mtp-layer: on a DeepSeek-V3 or GLM-4.5 checkpoint (a dense first
layer, MoE layers after it, MoE MTP layers), transformers' MTP generation builds MTP layer 0 with a dense MLP, finds
no weights for it and stops every `generate(use_mtp=True)` call.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`stopped_on_the_dense_mlp_of_an_mtp_layer`. Beside it: its standalone reproducer (reproducer.py) and the releases it
was measured on (versions.json); its write-up is
docs/findings/transformers-mtp-builds-a-dense-mlp-for-the-moe-mtp-layer.md.
"""

from __future__ import annotations

import re

from harness.subjects.engines.findings import FailedCase, Finding

MISSING = re.compile(r"RuntimeError: The following MtpModel weights are missing from .*?: \[([^\]]*)\]")
DENSE_MLP_WEIGHT = re.compile(r"'layers\.\d+\.mtp_block\.mlp\.(gate|up|down)_proj\.weight'")


def stopped_on_the_dense_mlp_of_an_mtp_layer(case: FailedCase) -> bool:
    """The engine stopped the decode with transformers' MtpModel loader naming missing weights, and every weight it
    names is a dense MLP projection of an MTP layer (`layers.N.mtp_block.mlp.{gate,up,down}_proj.weight`): what the
    dense MLP that get_mtp_config's first_k_dense_replace makes MtpModel build looks for, where the checkpoint holds
    the MoE's experts and router. A missing attention, norm, projection or expert weight is not explained."""
    found = MISSING.search(case.message)
    if found is None:
        return False
    names = [name.strip() for name in found.group(1).split(",") if name.strip()]
    return bool(names) and all(DENSE_MLP_WEIGHT.fullmatch(name) for name in names)


# every decode of transformers-mtp stops, so every case that decodes with it fails; the calibration cases decode with
# the harness's own decoder (and skip for any other), and two greedy files never call the subject: the golden
# reference (the harness's), and transformers' use_mtp against its plain greedy, which runs the harness's own
# transformers in its process. The features the subject serves decode with it too (measured on 5.14.1: the logprob
# cases)
DECODING = ("greedy/*", "sampling/test_target_distribution.py::*", "features/*")
NOT_THE_SUBJECT = ("greedy/test_reference_golden.py::*", "greedy/test_transformers_use_mtp.py::*")
FINDING = Finding(
    slug="transformers-mtp-builds-a-dense-mlp-for-the-moe-mtp-layer",
    title="on a DeepSeek-V3 or GLM-4.5 checkpoint, transformers' MTP generation builds the MTP layer with a dense MLP "
    "(get_mtp_config keeps the target's first_k_dense_replace, and MTP layer 0 is below it) where the checkpoint's is "
    "a mixture of experts, and every generate(use_mtp=True) stops on the dense MLP's missing weights",
    engine="transformers",
    decoders=("transformers-mtp",),
    found_in="5.15.0",
    flavours=("cpu", "cuda"),
    failing={"tiny-deepseek-v3": DECODING, "tiny-glm4-moe": DECODING},
    passing={"*": NOT_THE_SUBJECT},
    signature="the decode stopped by transformers' MtpModel loader with `RuntimeError: The following MtpModel weights "
    "are missing`, every weight it names a dense MLP projection of an MTP layer "
    "(`layers.N.mtp_block.mlp.{gate,up,down}_proj.weight`); any other missing weight is not explained",
    explains=stopped_on_the_dense_mlp_of_an_mtp_layer,
)
