"""The engines the harness tests, one package each (`vllm/`, `llamacpp/`, `transformers/`): those whose pins conflict
with the harness's run out of process, each in its own environment; transformers' pinned release is the harness's own
and runs in its process.

Each engine's package holds everything of it: its environment, the decoder the suites drive, the server that runs
inside its environment, its deployed configurations, its findings (findings/: one folder each, with its signature,
fix and reproducer); its `__init__` declares the engine's record (`ENGINE`, engine.py) with its abilities. The
registry (registry.py) reads the records: adding an engine is a package and one line there.

Shared by every engine: engine.py (the record), abilities.py (what an engine can do beyond what every engine does:
runners, a build from source, fixes, its own arguments, ...), registry.py, decoder.py (what every engine's decoder
does: its processes, wire calls, capabilities, configurations and fixes), process.py (a server process and the pool of
them), wire.py (the protocol), serving/ (what runs inside an engine's environment, standard library only: the servers'
main loop, and the sitecustomize that installs fixes under --engine-fixes), environments.py (building an engine's
environment), configurations.py (a deployed configuration and the evidence that it happened), findings.py (a finding:
its record, the tests it fails, its signature; discovered from its folder), finding_versions.py (the releases each
finding's reproducer was measured on) and watched_tests.py (the suites' tests findings watch).

Imports: harness.contract, harness.models, harness.decoding, harness.stats, harness.checks, harness.triage; an engine's
package imports the shared modules, never the registry."""
