"""Engines the harness drives out of process, each in its own environment (their pins conflict with the harness's
transformers), one package per engine.

Each engine's package (`vllm/`, `llamacpp/`, `transformers/`: transformers releases other than the harness's own)
holds everything of it: its environment, the decoder the suites drive, the server that runs inside its environment,
its deployed configurations, its findings with their signatures, fixes and reproducers; its `__init__` declares the
engine's record (`ENGINE`, engine.py). The registry (registry.py) reads the records: adding an engine is a package and
one line there.

Shared by every engine: engine.py (the record), registry.py, decoder.py (what every engine's decoder does: its
processes, wire calls, capabilities, configurations and fixes), process.py (a server process and the pool of them),
wire.py (the protocol), serving/ (server_loop.py: the main loop every server runs inside its engine's environment,
standard library only, on every server's PYTHONPATH), environments.py (building an engine's environment),
configurations.py (a deployed configuration and the evidence that it happened), findings.py (a finding, the tests it
fails, its signature) and watched_tests.py (the suites' tests findings watch).

Imports: harness.contract, harness.models, harness.decoding, harness.stats, harness.checks, harness.triage; an engine's
package imports the shared modules, never the registry."""
