"""Statistics, as pure functions: sample sizes from a power target (power.py), chi-square and G tests over
Cochran-pooled cells (goodness_of_fit.py), Holm's correction and the family alpha (multiple_testing.py),
uniformity tests of PIT values (uniformity.py), whole-sequence statistics with saddlepoint p-values
(sequence.py), the exact law of the first tokens under the target (target_law.py), and the simulated power
of a whole-sequence case against a bias at one position (position_power.py).

Imports: harness.contract, harness.models, harness.decoding."""
