"""What the suites test: decoders by name (registry.py: the harness's own, every engine's, `mutant:<name>`, entry
points, `module:factory`; light, no torch until a decoder is built), transformers' own MTP implementations
(transformers/), the mutant catalogue (mutants.py: the correct decoder with one real bug put in), engines driven out
of process in their own environments, one package per engine (engines/), and a run's options read from its command
line and checked before any test runs (run_options.py).

Imports: harness.contract, harness.models, harness.decoding, harness.stats, harness.checks, harness.triage."""
