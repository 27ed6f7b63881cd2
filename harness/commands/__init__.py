"""The `mtp-harness` command line: `run` (cli.py), `mutants`, `nightly`, `bench` and `engine`. Commands start
pytest as a child process (harness.contract.invocation) and never import the pytest plugin.

Imports: every subpackage but harness.plugin."""
