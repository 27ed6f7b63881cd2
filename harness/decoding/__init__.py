"""Decoding: the target-only reference (target_decoder.py) and the MTP-assisted speculative decoder
(mtp_decoder.py), assembled from pure parts: turning logits into the processed law and sampling it with
explicit uniforms (sampling.py), the acceptance rules with their formulas (acceptance.py), the MTP proposer,
batched slot caches with per-row rollback, incremental forward passes and per-row batch bookkeeping.

Imports: harness.contract, harness.models."""
