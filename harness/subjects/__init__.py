"""What the suites test: decoders by name (decoder_registry.py: the harness's own, every engine's, `mutant:<name>`,
entry points, `module:factory`; light, no torch until a decoder is built), the mutant catalogue (mutant_decoders.py:
the correct decoder with one real bug put in), and the engines, one package each (engines/: vLLM, llama.cpp and
transformers, whose pinned release runs in the harness's process).

Imports: harness.contract, harness.models, harness.decoding, harness.stats, harness.checks, harness.triage."""
