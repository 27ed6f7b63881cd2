"""What every engine server shares inside its engine's process: the main loop (server_loop.py), standard library
only. The harness puts this folder on every engine server's PYTHONPATH (harness/subjects/engines/process.py), so a
server in any environment, the harness's or not, imports it as `from server_loop import serve`; the harness itself
imports it as harness.subjects.engines.serving.server_loop (the protocol version).

Imports: nothing of the harness."""
