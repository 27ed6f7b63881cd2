"""The `mtp-harness` command line, one module per command (cli.py assembles them): run, mutants, nightly, engine,
matrix, summarize and bench; reference_docs.py writes the docs' generated parts and nightly_cost.py sizes a nightly.
Commands start pytest as a child process (harness.contract.invocation) and never import the pytest plugin.

Imports: every subpackage but harness.plugin."""
