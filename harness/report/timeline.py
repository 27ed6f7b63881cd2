"""The token timeline of one greedy case as inline SVG: one column per output position; rows for the
reference's token, the decoder's token and the drafts each verification pass proposed (accepted, the
rejected one, the ones after it that were never verified); pass boundaries as vertical lines, forced
positions outlined, the first divergence shaded. Token text is in each cell's tooltip (html-escaped)."""

from __future__ import annotations

import html
from typing import Any

from harness.report.charts import rect_element, text_element

CELL = 34  # px per output position
ROW = 22
LEFT = 92  # row labels
TOP = 30
MAX_POSITIONS = 48  # a longer case is cut (the minimal case of a group is short)


def _row_label(y: float, label: str) -> str:
    return text_element(LEFT - 6, y + ROW * 0.68, label, "timeline-label", "end")


def _cell(position: int, y: float, token: dict[str, Any] | int, css_class: str, tooltip: str) -> str:
    token_id = token["id"] if isinstance(token, dict) else token
    text = f" {token['text']!r}" if isinstance(token, dict) else ""
    x = LEFT + position * CELL
    return rect_element(x + 1, y + 1, CELL - 2, ROW - 2, css_class, f"{tooltip}: {token_id}{text}") + text_element(
        x + CELL / 2, y + ROW * 0.68, str(token_id), "timeline-id"
    )


def timeline_svg(
    reference: list[dict[str, Any]],
    actual: list[dict[str, Any]],
    passes: list[dict[str, Any]],
    forced: dict[str, int],
    divergence: int | None,
) -> str:
    """The timeline of one case (see the module docstring) as an <svg> string."""
    positions = min(max(len(reference), len(actual), 1), MAX_POSITIONS)
    draft_rows = 1 + max((len(p["drafts"]) for p in passes), default=0) // 2  # passes alternate two bands
    height = TOP + ROW * (3 + min(draft_rows, 2)) + 24
    width = LEFT + positions * CELL + 12
    body: list[str] = []
    if divergence is not None and divergence < positions:
        x = LEFT + divergence * CELL
        body.append(rect_element(x, TOP - 4, CELL, height - TOP - 16, "timeline-divergence", "first divergence"))
    for position in range(positions):
        body.append(text_element(LEFT + position * CELL + CELL / 2, TOP - 8, str(position), "timeline-position"))
    rows = {"reference": TOP, "decoder": TOP + ROW, "drafts": TOP + 2 * ROW + 6}
    for label, y in rows.items():
        body.append(_row_label(y, label))
    for position, token in enumerate(reference[:positions]):
        body.append(_cell(position, rows["reference"], token, "timeline-token", f"reference at {position}"))
    for position, token in enumerate(actual[:positions]):
        same = position < len(reference) and reference[position]["id"] == token["id"]
        css = "timeline-token" if same else "timeline-wrong"
        body.append(_cell(position, rows["decoder"], token, css, f"decoder at {position}"))
    for number, step in enumerate(passes):
        start = step["start"]
        if start < positions:
            x = LEFT + start * CELL
            body.append(f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{height - 18}" class="timeline-pass"/>')
            body.append(text_element(x + 3, height - 6, f"pass {number}", "timeline-pass-label", "start"))
        y = rows["drafts"] + (number % 2) * ROW
        for index, token in enumerate(step["drafts"]):
            position = start + index
            if position >= positions:
                break
            if index < step["accepted"]:
                css, state = "timeline-accepted", "accepted draft"
            elif index == step["accepted"]:
                css, state = "timeline-rejected", "rejected draft"
            else:
                css, state = "timeline-unverified", "draft after the rejection (never verified)"
            if str(position) in forced:
                state += ", forced"
                css += " timeline-forced"
            body.append(_cell(position, y, token, css, f"pass {number} {state} at {position}"))
    title = f"token timeline: {len(passes)} passes, first divergence at {divergence}"
    return (
        f'<svg class="chart timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>{html.escape(title)}</title>{''.join(body)}</svg>"
    )
