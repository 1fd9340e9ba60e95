"""A failed comparison's matrix as a picture: the student's values beside the expected ones, one
colour scale for both, the differing cells outlined. Inline SVG, no script, no network.

Drawn from a picture dict of :mod:`autograder.judge.pictures` (public checks only).
"""

from __future__ import annotations

import html
import math

CELL = 18  # pixels per cell; matrices are at most 24 x 24 (autograder.judge.pictures.LARGEST)
GAP = 28
NEGATIVE, POSITIVE, MISSING = (33, 102, 172), (178, 24, 43), "#8c8c8c"
MASK_TRUE, MASK_FALSE = "#3b3b3b", "#f2f2f2"
DIFFER = "#ff8c00"


def _number(value) -> float:
    return float(value)  # non-finite values travel as "inf", "-inf", "nan", which parse too


def _blend(colour: tuple[int, int, int], amount: float) -> str:
    r, g, b = (round(255 + (c - 255) * amount) for c in colour)
    return f"#{r:02x}{g:02x}{b:02x}"


def _scale(picture: dict) -> float:
    """The largest finite magnitude of both panels: one scale, so equal values get equal colours."""
    finite = [abs(v) for panel in ("actual", "expected") for row in picture[panel]
              for v in map(_number, row) if math.isfinite(v)]
    return max(finite, default=0.0) or 1.0


def _fill(value: float, top: float, mask: bool) -> str:
    if mask:
        return MASK_TRUE if value else MASK_FALSE
    if not math.isfinite(value):
        return MISSING
    return _blend(POSITIVE if value >= 0 else NEGATIVE, min(abs(value) / top, 1.0))


def _shown(value: float, mask: bool) -> str:
    if mask:
        return "True" if value else "False"
    return f"{value:.4g}" if math.isfinite(value) else {"inf": "∞", "-inf": "−∞"}.get(str(value), "NaN")


def _panel(picture: dict, panel: str, title: str, left: int, top: float) -> list[str]:
    rows, cols, mask = picture[panel], picture["cols"][0], picture["mask"]
    first_row = picture["rows"][0]
    out = [f"<text x='{left}' y='12' font-size='12' font-weight='bold'>{title}</text>"]
    for i, row in enumerate(rows):
        y = 20 + i * CELL
        out.append(f"<text x='{left - 3}' y='{y + CELL * 0.7:.0f}' font-size='9' text-anchor='end' fill='#666'>"
                   f"{first_row + i}</text>")
        for j, raw in enumerate(row):
            value, x = _number(raw), left + j * CELL
            differs = picture["differ"][i][j]
            stroke = f" stroke='{DIFFER}' stroke-width='2.5'" if differs else " stroke='#fff' stroke-width='0.5'"
            label = f"[{', '.join(map(str, [*picture['slice'], first_row + i, cols + j]))}] = {_shown(value, mask)}"
            out.append(f"<rect x='{x}' y='{y}' width='{CELL}' height='{CELL}' fill='{_fill(value, top, mask)}'{stroke}>"
                       f"<title>{html.escape(label + (' (differs)' if differs else ''))}</title></rect>")
            if not mask and not math.isfinite(value):
                out.append(f"<text x='{x + CELL / 2:.0f}' y='{y + CELL * 0.7:.0f}' font-size='9' text-anchor='middle' "
                           f"fill='#fff'>{_shown(value, mask)}</text>")
    return out


def _legend(top: float, mask: bool, left: int, y: int) -> list[str]:
    if mask:
        return [f"<rect x='{left}' y='{y}' width='12' height='12' fill='{MASK_TRUE}'/>"
                f"<text x='{left + 16}' y='{y + 10}' font-size='10'>True</text>"
                f"<rect x='{left + 52}' y='{y}' width='12' height='12' fill='{MASK_FALSE}' stroke='#ccc'/>"
                f"<text x='{left + 68}' y='{y + 10}' font-size='10'>False</text>"
                f"<rect x='{left + 110}' y='{y}' width='12' height='12' fill='none' stroke='{DIFFER}' stroke-width='2.5'/>"
                f"<text x='{left + 126}' y='{y + 10}' font-size='10'>differs</text>"]
    steps = 11
    out = [f"<rect x='{left + k * 10}' y='{y}' width='10' height='12' "
           f"fill='{_fill(top * (2 * k / (steps - 1) - 1), top, False)}'/>" for k in range(steps)]
    return [*out, f"<text x='{left}' y='{y + 24}' font-size='10'>{-top:.3g}</text>",
            f"<text x='{left + steps * 10}' y='{y + 24}' font-size='10' text-anchor='end'>{top:.3g}</text>",
            f"<rect x='{left + steps * 10 + 16}' y='{y}' width='12' height='12' fill='none' stroke='{DIFFER}' "
            "stroke-width='2.5'/>",
            f"<text x='{left + steps * 10 + 32}' y='{y + 10}' font-size='10'>differs</text>"]


def heatmap_svg(picture: dict) -> str:
    """Yours and expected side by side, as one inline ``<svg>`` element."""
    n_rows, n_cols = len(picture["expected"]), len(picture["expected"][0])
    top = _scale(picture)
    width = n_cols * CELL
    left = 22
    body = [*_panel(picture, "actual", "yours", left, top),
            *_panel(picture, "expected", "expected", left + width + GAP, top),
            *_legend(top, picture["mask"], left, 28 + n_rows * CELL)]
    where = "".join(f"{i}, " for i in picture["slice"])
    caption = (f"[{where}{picture['rows'][0]}:{picture['rows'][1]}, {picture['cols'][0]}:{picture['cols'][1]}] "
               "of your answer and of the expected one")
    total_width = max(left + 2 * width + GAP + 4, 220)
    height = 28 + n_rows * CELL + 32
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='heatmap' width='{total_width}' height='{height}' "
            f"viewBox='0 0 {total_width} {height}' role='img' aria-label='{html.escape(caption)}'>"
            f"<title>{html.escape(caption)}</title>{''.join(body)}</svg>")
