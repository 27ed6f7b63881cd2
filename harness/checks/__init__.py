"""The checks the suites make, as library code: forced-rejection schedules, where two greedy outputs part
and whether that is a near-tie (divergence.py), state invariants after every verification pass
(invariants.py), the sampling suite's case grid and how a case is run (sampling_cases.py), the report's record of a
law case (law_records.py), the features suite's truth, cases, checks and law cases (feature_cases.py,
feature_grid.py, feature_checks.py, feature_laws.py), and the acceptance profile.

Imports: harness.contract, harness.models, harness.decoding, harness.stats."""
