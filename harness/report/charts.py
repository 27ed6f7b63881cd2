"""Inline SVG charts for the HTML report: pure functions from numbers and labels to an SVG string.

Every label and title goes through html.escape; coordinates are printed with one decimal so the same
input gives the same bytes. No ids, no scripts, no external references: the SVG is pasted into the page.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

WIDTH = 560
HEIGHT = 220
MARGIN_LEFT = 48
MARGIN_RIGHT = 12
MARGIN_TOP = 28
MARGIN_BOTTOM = 40
LABEL_CHARS = 10  # tick labels longer than this are cut; the full text is in the bar's tooltip


def text_element(x: float, y: float, text: str, css_class: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{css_class}" text-anchor="{anchor}">{html.escape(text)}</text>'


def rect_element(x: float, y: float, width: float, height: float, css_class: str, tooltip: str) -> str:
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(width, 0.0):.1f}" height="{max(height, 0.0):.1f}" '
        f'class="{css_class}"><title>{html.escape(tooltip)}</title></rect>'
    )


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def _frame(title: str, body: list[str], width: int = WIDTH, height: int = HEIGHT) -> str:
    """The <svg> element: accessible title, plot axes and the body."""
    bottom = height - MARGIN_BOTTOM
    axes = (
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{bottom}" class="axis"/>'
        f'<line x1="{MARGIN_LEFT}" y1="{bottom}" x2="{width - MARGIN_RIGHT}" y2="{bottom}" class="axis"/>'
    )
    heading = text_element(MARGIN_LEFT, 16, title, "chart-title", "start")
    return (
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>{html.escape(title)}</title>{heading}{axes}{''.join(body)}</svg>"
    )


def _y_scale(top_value: float, height: int = HEIGHT) -> tuple[float, float]:
    """Pixels per unit and the baseline y, so that `top_value` reaches the top of the plot area."""
    plot_height = height - MARGIN_TOP - MARGIN_BOTTOM
    return plot_height / top_value if top_value > 0 else 0.0, float(height - MARGIN_BOTTOM)


def _y_ticks(top_value: float, value_format: str) -> list[str]:
    scale, baseline = _y_scale(top_value)
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        value = top_value * fraction
        label = value_format.format(value)
        ticks.append(text_element(MARGIN_LEFT - 4, baseline - value * scale + 4, label, "tick", "end"))
    return ticks


def _slots(count: int, width: int = WIDTH) -> tuple[float, float]:
    """Left edge of slot 0 and the width of one slot, for `count` equal slots along the x axis."""
    plot_width = width - MARGIN_LEFT - MARGIN_RIGHT
    return float(MARGIN_LEFT), plot_width / max(count, 1)


def bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, value_format: str = "{:.3g}") -> str:
    """One bar per label, value printed above each bar."""
    top = max([*values, 0.0]) * 1.1 or 1.0
    scale, baseline = _y_scale(top)
    left, slot = _slots(len(values))
    body = _y_ticks(top, value_format)
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = left + i * slot + slot * 0.15
        body.append(rect_element(x, baseline - value * scale, slot * 0.7, value * scale, "bar", f"{label}: {value}"))
        body.append(text_element(x + slot * 0.35, baseline - value * scale - 3, value_format.format(value), "value"))
        body.append(text_element(x + slot * 0.35, baseline + 14, _short(label), "tick"))
    return _frame(title, body)


def histogram(
    counts: Sequence[int],
    *,
    title: str,
    bin_labels: Sequence[str] | None = None,
    expected: float | None = None,
    expected_label: str = "expected",
) -> str:
    """Adjacent bars for binned counts; an optional dashed horizontal line at the expected count per bin."""
    labels = list(bin_labels) if bin_labels is not None else [str(i) for i in range(len(counts))]
    top = max([*counts, expected or 0.0, 0.0]) * 1.1 or 1.0
    scale, baseline = _y_scale(top)
    left, slot = _slots(len(counts))
    body = _y_ticks(top, "{:.0f}")
    label_every = max(1, len(counts) // 10)
    for i, (label, count) in enumerate(zip(labels, counts, strict=True)):
        x = left + i * slot
        height = count * scale
        body.append(rect_element(x + 0.5, baseline - height, slot - 1.0, height, "bar", f"{label}: {count}"))
        if i % label_every == 0:
            body.append(text_element(x + slot / 2, baseline + 14, _short(label), "tick"))
    if expected is not None:
        y = baseline - expected * scale
        right = WIDTH - MARGIN_RIGHT
        body.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" class="expected"/>')
        body.append(text_element(right, y - 4, f"{expected_label} {expected:.3g}", "legend", "end"))
    return _frame(title, body)


def observed_vs_expected(
    labels: Sequence[str], observed: Sequence[float], expected: Sequence[float], *, title: str
) -> str:
    """Per cell, an observed bar beside an outlined expected bar, so a shifted cell stands out."""
    top = max([*observed, *expected, 0.0]) * 1.1 or 1.0
    scale, baseline = _y_scale(top)
    left, slot = _slots(len(labels))
    body = _y_ticks(top, "{:.0f}")
    for i, (label, seen, wanted) in enumerate(zip(labels, observed, expected, strict=True)):
        x = left + i * slot + slot * 0.1
        half = slot * 0.4
        body.append(rect_element(x, baseline - seen * scale, half, seen * scale, "bar", f"{label}: observed {seen}"))
        body.append(
            rect_element(
                x + half,
                baseline - wanted * scale,
                half,
                wanted * scale,
                "bar-expected",
                f"{label}: expected {wanted:.1f}",
            )
        )
        body.append(text_element(x + half, baseline + 14, _short(label), "tick"))
    legend_y = HEIGHT - 12
    body.append(rect_element(WIDTH - 170, legend_y - 9, 10, 10, "bar", "observed"))
    body.append(text_element(WIDTH - 156, legend_y, "observed", "legend", "start"))
    body.append(rect_element(WIDTH - 90, legend_y - 9, 10, 10, "bar-expected", "expected"))
    body.append(text_element(WIDTH - 76, legend_y, "expected", "legend", "start"))
    return _frame(title, body)
