"""The HTML report of one run: a pure rendering of results.json into one self-contained page (render.py,
templates/), its inline SVG charts (charts.py) and token timelines (timeline.py), the run header that
says who ran what with which versions (run_header.py), and the engine suite's evidence as text
(engine_evidence.py, shared with the markdown summary).

Imports: every subpackage below harness.plugin and harness.commands."""
