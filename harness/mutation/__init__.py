"""The mutation catalogue run and what it measures: every suite against the correct decoder and every
mutant (catalogue.py), the samples the sampling suite needs to reject each mutant against ideal tests
(efficiency.py, position_efficiency.py, efficiency_table.py), and the power table of the whole-sequence case
(power_table.py).

Imports: harness.contract up to harness.subjects."""
