"""The contract between the harness and everything it drives: the decoder contract (decoder.py: requests,
results, verification passes, the inspection hook), the request features and which a decoder serves (features.py),
the harness's errors, seeds, where suites, fixtures and
reports live (paths.py), run budgets, the suites themselves (suites.py: names, markers, what the catalogue runs), a
run's options as one value and the one function that writes them back as a command line (run_options.py), the
results records that suites write and triage and the report read (records.py), and the pytest command that runs
the suites (invocation.py).

Imports: nothing of the harness. Everything else may import it."""
