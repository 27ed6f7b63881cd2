"""The checks the suites make, as library code: forced-rejection schedules, where two greedy outputs part
and whether that is a near-tie (divergence.py), state invariants after every verification pass
(invariants.py), the sampling suite's case grid and how a case is run (sampling_cases.py), and the
acceptance profile.

Imports: harness.contract, harness.models, harness.decoding, harness.stats."""
