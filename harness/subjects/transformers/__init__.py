"""transformers' own implementations as subjects: `transformers-mtp` (its native MTP generation) and
`transformers-assisted` (its assisted-generation loop with the MTP depths as the draft model), with forced
drafts and verification passes taken from transformers' own loop (candidates.py, use_mtp.py).

Imports: harness.contract, harness.models, harness.decoding."""
