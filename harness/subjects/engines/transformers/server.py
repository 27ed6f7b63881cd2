"""The transformers engine server: runs inside the environment of one transformers release (torch and that release
only: no harness installed) and speaks the harness's wire protocol (harness/subjects/engines/wire.py).

What it runs is the in-process subject's code (harness/subjects/engines/transformers/): the checkpoint loaded as the
harness loads it (harness/models/loading.py: its float64-exact attention and arithmetic, so that the release's
generation loop is compared with the harness's reference and nothing else differs), and the release's own `generate`
(use_mtp=True, or assisted generation with the layer-skip draft) with its candidate generator wrapped to force
drafts and record the verification passes (candidates.py). So a release is tested exactly as the pinned one is in
the harness's process.

This environment has no harness installed: the harness's package is imported from the folder this file lives in (by
path, `harness` only: nothing else of the harness's environment is put on the path), and the servers' shared loop
from PYTHONPATH (harness/subjects/engines/process.py). The first line is the configuration, data only:
{"model": directory, "device", "dtype", "method": "mtp" | "assisted", "num_draft_tokens": k, "draft_mode"}.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[3]  # harness/subjects/engines/transformers/server.py -> harness/


def import_harness() -> None:
    """Make `harness` the package in HARNESS (this file's own harness), whatever else the environment holds."""
    spec = importlib.util.spec_from_file_location(
        "harness", HARNESS / "__init__.py", submodule_search_locations=[str(HARNESS)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["harness"] = package
    spec.loader.exec_module(package)


class TransformersEngine:
    """One release's MTP or assisted generation on one model, k and draft mode."""

    def __init__(self, config: dict) -> None:
        import transformers

        from harness.models.loading import load_bundle
        from harness.subjects.engines.transformers.generation import TransformersAssistedDecoder, TransformersMTPDecoder

        self.version = transformers.__version__
        self.method = config["method"]
        self.num_draft_tokens = int(config["num_draft_tokens"])
        self.draft_mode = config["draft_mode"]
        decoder = {"mtp": TransformersMTPDecoder, "assisted": TransformersAssistedDecoder}[self.method]
        # the MTP decoder refuses a release without MTP generation (harness/subjects/engines/transformers/use_mtp.py)
        self.decoder = decoder(load_bundle(config["model"], config["device"], config["dtype"]))

    def describe(self) -> dict:
        return {"name": "transformers", "version": self.version, "method": self.method}

    def take_evidence(self) -> dict:
        return {}

    def decode(self, message: dict) -> list[dict]:
        from harness.subjects.engines.wire import parse_request, result_message

        requests = [parse_request(r, self.num_draft_tokens, self.draft_mode) for r in message["requests"]]
        return [result_message(result) for result in self.decoder.decode(requests)]


def main() -> None:
    import_harness()
    from server_loop import serve  # the servers' shared loop, on PYTHONPATH

    serve(TransformersEngine, {"decode": lambda engine, message: engine.decode(message)})


if __name__ == "__main__":
    main()
