"""Decoding: the target-only reference (target_decoder.py) and the MTP-assisted speculative decoder
(mtp_decoder.py), assembled from pure parts: turning logits into the processed law and sampling it with
explicit uniforms (sampling.py), the request's processors that read each position's history (processors.py: logit
bias, min_tokens, penalties), the acceptance rules with their formulas (acceptance.py), the MTP proposer,
batched slot caches with per-row rollback, incremental forward passes and per-row batch bookkeeping.

Imports: harness.contract, harness.models."""
