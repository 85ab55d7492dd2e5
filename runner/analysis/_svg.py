"""Tiny inline-SVG chart primitives for the self-contained HTML report.

No JavaScript, no fonts or stylesheets from elsewhere: each function returns one ``<svg>``
element as a string, with fixed geometry and number formatting so equal inputs give equal bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["hbar_chart", "heatmap", "nice_max"]

INK = "#1f2933"
GRID = "#d9dee4"
BAR = "#3b6ea5"
ACCENT = "#c2410c"


def _n(x: float) -> str:
    """Fixed-precision coordinate text."""
    s = f"{x:.1f}"
    return "0" if s in ("0.0", "-0.0") else s.removesuffix(".0")


def _text(x: float, y: float, s: str, *, anchor: str = "start", size: int = 12,
          weight: str = "normal", fill: str = INK) -> str:  # fmt: skip
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" '
        f'font-weight="{weight}" fill="{fill}">{escape(s)}</text>'
    )


def hbar_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    value_text: Sequence[str],
    intervals: Sequence[tuple[float, float] | None] | None = None,
    vmax: float,
    highlight: str | None = None,
    axis_unit: str = "",
    subtitle: str = "",
    width: int = 470,
) -> str:
    """Horizontal bars (one per label) from 0 to ``vmax``, optional interval whiskers."""
    vmax = nice_max(vmax)
    label_w, right_w, row_h = 140, 92, 26
    top = 50 if subtitle else 34
    plot_w = width - label_w - right_w
    height = top + row_h * len(labels) + 28
    scale = plot_w / vmax if vmax > 0 else 0.0
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        _text(4, 18, title, size=13, weight="bold"),
    ]
    if subtitle:
        out.append(_text(4, 34, subtitle, size=11, fill="#52606d"))
    for k in range(5):
        x = label_w + plot_w * k / 4
        out.append(
            f'<line x1="{_n(x)}" y1="{top - 4}" x2="{_n(x)}" '
            f'y2="{top + row_h * len(labels)}" stroke="{GRID}" stroke-width="1"/>'
        )
        tick_s = f"{vmax * k / 4:.6g}"
        out.append(
            _text(x, top + row_h * len(labels) + 16, tick_s + axis_unit, anchor="middle", size=10)
        )
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = top + row_h * i
        colour = ACCENT if label == highlight else BAR
        out.append(_text(label_w - 6, y + 16, label, anchor="end"))
        out.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{_n(max(value, 0.0) * scale)}" '
            f'height="{row_h - 8}" fill="{colour}"><title>{escape(label)}: '
            f"{escape(value_text[i])}</title></rect>"
        )
        iv = intervals[i] if intervals is not None else None
        if iv is not None:
            lo, hi = (max(0.0, min(vmax, v)) * scale + label_w for v in iv)
            mid = y + row_h / 2
            out.append(
                f'<path d="M{_n(lo)} {_n(mid)}H{_n(hi)}M{_n(lo)} {_n(mid - 5)}V{_n(mid + 5)}'
                f'M{_n(hi)} {_n(mid - 5)}V{_n(mid + 5)}" stroke="{INK}" stroke-width="1.5" '
                'fill="none"/>'
            )
        out.append(_text(label_w + plot_w + 6, y + 16, value_text[i], size=11))
    out.append("</svg>")
    return "".join(out)


def nice_max(v: float) -> float:
    """The smallest 4 x (a round step) at or above ``v``, so the four ticks read well (1 if v <= 0)."""
    if v <= 0:
        return 1.0
    raw = v / 4
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * mag >= raw * (1 - 1e-12):
            return float(f"{4 * m * mag:.12g}")
    return float(4 * 10 * mag)


def _heat_colour(v: float) -> str:
    """White (0) to deep red (1)."""
    v = max(0.0, min(1.0, v))
    r = round(255 - v * (255 - 165))
    g = round(255 - v * (255 - 15))
    b = round(255 - v * (255 - 21))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    title: str,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    cells: Sequence[Sequence[tuple[float, str] | None]],
    *,
    legend: str,
    cell_w: int = 64,
    links: Sequence[Sequence[str | None]] | None = None,
) -> str:
    """A grid of cells coloured by a 0..1 value and labelled with text; ``None`` is blank.

    ``links`` (same shape as ``cells``) wraps each non-blank cell in a link to that address."""
    label_w, cell_h, top = 140, 26, 48
    width = label_w + cell_w * len(col_labels) + 10
    height = top + cell_h * len(row_labels) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        _text(4, 18, title, size=13, weight="bold"),
    ]
    for j, col in enumerate(col_labels):
        out.append(_text(label_w + cell_w * j + cell_w / 2, top - 8, col, anchor="middle"))
    for i, row in enumerate(row_labels):
        y = top + cell_h * i
        out.append(_text(label_w - 6, y + 17, row, anchor="end"))
        for j, cell in enumerate(cells[i]):
            x = label_w + cell_w * j
            if cell is None:
                out.append(
                    f'<rect x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" '
                    f'fill="#f3f4f6" stroke="#ffffff"/>'
                )
                continue
            v, text = cell
            fill = _heat_colour(v)
            ink = "#ffffff" if v > 0.55 else INK
            href = links[i][j] if links is not None else None
            if href:
                out.append(f'<a href="{escape(href)}">')
            out.append(
                f'<rect x="{x}" y="{y}" width="{cell_w}" height="{cell_h}" fill="{fill}" '
                f'stroke="#ffffff"><title>{escape(row)} / {escape(col_labels[j])}: '
                f"{escape(text)}</title></rect>"
            )
            out.append(_text(x + cell_w / 2, y + 17, text, anchor="middle", size=11, fill=ink))
            if href:
                out.append("</a>")
    ly = top + cell_h * len(row_labels) + 10
    for k in range(6):
        out.append(
            f'<rect x="{label_w + 18 * k}" y="{ly}" width="18" height="10" '
            f'fill="{_heat_colour(k / 5)}" stroke="{GRID}"/>'
        )
    out.append(_text(label_w + 18 * 6 + 8, ly + 9, legend, size=10))
    out.append("</svg>")
    return "".join(out)
