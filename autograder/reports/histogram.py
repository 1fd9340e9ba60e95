"""The distribution of a class's totals as an inline SVG bar chart with axes: ten bins of a tenth
of the maximum each, and full marks as a bar of its own (90-100 would hide who has everything)."""

from __future__ import annotations

import html
import math

WIDTH, HEIGHT = 560, 200
LEFT, BOTTOM, TOP = 40, 36, 18  # room for the count axis, the bin labels and the tallest count


def bins(totals: list[float], maximum: float) -> list[tuple[str, int]]:
    """``[(label, count)]``: [0, 10), ..., [90, 100) of ``maximum`` in tenths, then full marks."""
    step = maximum / 10
    counts = [0] * 11
    for total in totals:
        counts[10 if total >= maximum else min(int(total // step), 9)] += 1
    labels = [f"{i * step:g}–{(i + 1) * step:g}" for i in range(10)] + [f"{maximum:g}"]
    return list(zip(labels, counts))


def ticks(top: int) -> list[int]:
    """A few round counts for the vertical axis, from 0 to at least ``top``."""
    step = max(1, 10 ** int(math.log10(max(top, 1))))
    while top / step > 5:
        step *= 2
    return list(range(0, top + step, step))


def histogram_svg(totals: list[float], maximum: float) -> str:
    data = bins(totals, maximum)
    axis = ticks(max(count for _, count in data))
    ceiling = axis[-1] or 1
    plot_h = HEIGHT - BOTTOM - TOP
    bar = (WIDTH - LEFT - 10) / len(data)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' id='histogram' width='{WIDTH}' height='{HEIGHT}' "
           f"viewBox='0 0 {WIDTH} {HEIGHT}' role='img' aria-label='distribution of totals'>"]
    for value in axis:
        y = TOP + plot_h * (1 - value / ceiling)
        out.append(f"<line x1='{LEFT}' x2='{WIDTH - 10}' y1='{y:.1f}' y2='{y:.1f}' stroke='#e5e5e5'/>"
                   f"<text x='{LEFT - 5}' y='{y + 4:.1f}' font-size='11' text-anchor='end'>{value}</text>")
    for i, (label, count) in enumerate(data):
        h = plot_h * count / ceiling
        x = LEFT + i * bar
        full = i == len(data) - 1
        out.append(f"<rect x='{x + 3:.1f}' y='{TOP + plot_h - h:.1f}' width='{bar - 6:.1f}' height='{h:.1f}' "
                   f"fill='{'#1a7f37' if full else '#4c78a8'}'><title>{html.escape(label)}: {count}</title></rect>")
        if count:
            out.append(f"<text x='{x + bar / 2:.1f}' y='{TOP + plot_h - h - 4:.1f}' font-size='11' "
                       f"text-anchor='middle'>{count}</text>")
        out.append(f"<text x='{x + bar / 2:.1f}' y='{HEIGHT - BOTTOM + 14}' font-size='10' text-anchor='middle'>"
                   f"{html.escape(label)}</text>")
    out.append(f"<line x1='{LEFT}' x2='{LEFT}' y1='{TOP}' y2='{TOP + plot_h}' stroke='#555'/>"
               f"<line x1='{LEFT}' x2='{WIDTH - 10}' y1='{TOP + plot_h}' y2='{TOP + plot_h}' stroke='#555'/>"
               f"<text x='{(LEFT + WIDTH) / 2:.0f}' y='{HEIGHT - 4}' font-size='11' text-anchor='middle'>"
               f"total points (the last bar: full marks)</text>"
               f"<text x='12' y='{TOP + plot_h / 2:.0f}' font-size='11' text-anchor='middle' "
               f"transform='rotate(-90 12 {TOP + plot_h / 2:.0f})'>students</text></svg>")
    return "".join(out)
