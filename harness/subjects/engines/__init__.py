"""Engines the harness drives out of process, each in its own environment (their pins conflict with the harness's
transformers). Shared: environments.py builds an engine's environment, process.py runs its server and speaks
wire.py to it, supported.py lists the engines with their decoder names and findings.

Per engine: `<engine>_environment.py` (pins, server script), `<engine>_subject.py` (the decoder the suites drive),
`<engine>_server.py` (runs inside the engine's environment and imports nothing from the harness),
`<engine>_findings.py` and `<engine>_signatures.py` (the bugs found in it and what their failures look like).
vLLM also has vllm_drafting.py (its MTP drafts as the findings describe them, for the signatures),
vllm_reproducer.py (triage's vLLM-alone reproducer) and vllm_fixes/ (the findings' fixes, applied inside the
engine process under --engine-fixes only, never imported here).

Imports: harness.contract, harness.models, harness.decoding, harness.triage, harness.subjects.findings."""
