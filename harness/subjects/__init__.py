"""What the suites test: decoders by name (registry.py: built-ins, `mutant:<name>`, entry points, `module:factory`;
names.py: the names alone, read without importing a decoder), the built-in decoders, transformers' own MTP
implementations (transformers/), the mutant catalogue (mutants.py: the correct decoder with one real bug put in),
the bugs found in other people's engines (findings.py), and engines driven out of process in their own environments
(engines/).

Imports: harness.contract, harness.models, harness.decoding, harness.stats, harness.checks, harness.triage."""
