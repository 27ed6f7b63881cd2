"""An example of a user's own decoder plugged in as `--decoder example_decoder:make_decoder`.

It wraps the harness's MTPDecoder (a real plugin would wrap its own engine) and counts its calls, so
the test can see that the harness drove it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.api import DecodeRequest, DecodeResult, ModelBundle, MTPDecoder


class CountingDecoder:
    name = "example"

    def __init__(self, bundle: ModelBundle) -> None:
        self.inner = MTPDecoder(bundle)
        self.calls = 0

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        self.calls += 1
        return self.inner.decode(requests)


def make_decoder(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> CountingDecoder:
    return CountingDecoder(bundle)


def broken_factory(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> CountingDecoder:
    raise RuntimeError("engine failed to start: no GPU memory")


def not_a_decoder(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> object:
    return object()
