"""Whether one transformers release's MTP generation can serve a model directory: run at the door inside that
release's environment (`python model_probe.py DIRECTORY`), so that what a release lacks is measured on the release
itself, never assumed from the harness's own. Exit 0 where it can; NO_MTP (5), with the reason on stdout, where it
cannot (use_mtp.mtp_generation_problem, asked of the release's config class, model class and the checkpoint's MTP
layout); anything else where the directory could not be read (the error on stderr).

It reads config.json and the safetensors headers only, no weight, as the door does. The directory is an argument,
data only. The harness's package is imported by path as the server does (server.py)."""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    from server import import_harness  # this folder is the script's: server.py beside it

    import_harness()
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    from harness.models.checkpoint import open_checkpoint
    from harness.models.layouts import detect_layout
    from harness.models.loading import load_config
    from harness.subjects.engines.environments import NO_MTP
    from harness.subjects.engines.transformers.use_mtp import mtp_generation_problem

    directory = Path(sys.argv[1])
    config = load_config(directory)
    layout = detect_layout(open_checkpoint(directory).tensor_names, config.num_hidden_layers)
    problem = mtp_generation_problem(config, MODEL_FOR_CAUSAL_LM_MAPPING[type(config)], layout.name)
    if problem is None:
        return 0
    print(problem)
    return NO_MTP


if __name__ == "__main__":
    sys.exit(main())
