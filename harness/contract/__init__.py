"""The contract between the harness and everything it drives: the decoder contract (decoder.py: requests,
results, verification passes, the inspection hook), the harness's errors, seeds, where suites, fixtures and
reports live (paths.py), run budgets, the results records that suites write and triage and the report read
(records.py), and the pytest command that runs the suites (invocation.py).

Imports: nothing of the harness. Everything else may import it."""
