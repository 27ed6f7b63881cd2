"""Engines the harness drives out of process, in their own environments (vLLM: its pins conflict with the
harness's transformers): environments.py builds them, process.py runs a server and speaks wire.py to it,
vllm_subject.py is the vLLM decoder, vllm_server.py runs inside vLLM's environment (no harness import),
vllm_findings.py holds the bugs found in vLLM, and supported.py lists the engines with their decoder names."""
