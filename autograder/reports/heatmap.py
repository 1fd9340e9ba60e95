"""A failed comparison's matrix as a picture: the student's values beside the expected ones, one
colour scale for both, the differing cells outlined. Inline SVG, no script, no network.

Drawn from a picture dict of :mod:`autograder.judge.pictures` (public checks only). The scale is
sequential (white to red) when no value is negative, as probabilities never are, and
diverging (blue, white, red) only when values of both signs are drawn; NaN and the infinities
have colours of their own, each with a legend entry; rows and columns carry their indices, and
the slice drawn is written under the picture.
"""

from __future__ import annotations

import html
import math

CELL = 18  # pixels per cell; matrices are at most 24 x 24 (autograder.judge.pictures.LARGEST)
GAP = 28
GRID_TOP = 30  # below the panel titles (y 12) and the column indices (y 26)
NEGATIVE, POSITIVE = (33, 102, 172), (178, 24, 43)
NON_FINITE = {"nan": ("#8c8c8c", "NaN", ""), "inf": ("#4a0010", "∞", "∞"), "-inf": ("#0b2545", "−∞", "−∞")}
MASK_TRUE, MASK_FALSE = "#3b3b3b", "#f2f2f2"
DIFFER = "#ff8c00"


def _number(value) -> float:
    return float(value)  # non-finite values travel as "inf", "-inf", "nan", which parse too


def _blend(colour: tuple[int, int, int], amount: float) -> str:
    r, g, b = (round(255 + (c - 255) * amount) for c in colour)
    return f"#{r:02x}{g:02x}{b:02x}"


def _values(picture: dict) -> list[float]:
    return [_number(v) for panel in ("actual", "expected") for row in picture[panel] for v in row]


def _scale(values: list[float]) -> float:
    """The largest finite magnitude of both panels: one scale, so equal values get equal colours."""
    return max((abs(v) for v in values if math.isfinite(v)), default=0.0) or 1.0


def _kind(value: float) -> str:
    return str(value)  # "nan", "inf" or "-inf" for a non-finite value


def _fill(value: float, top: float, mask: bool) -> str:
    if mask:
        return MASK_TRUE if value else MASK_FALSE
    if not math.isfinite(value):
        return NON_FINITE[_kind(value)][0]
    return _blend(POSITIVE if value >= 0 else NEGATIVE, min(abs(value) / top, 1.0))


def _shown(value: float, mask: bool) -> str:
    if mask:
        return "True" if value else "False"
    return f"{value:.4g}" if math.isfinite(value) else NON_FINITE[_kind(value)][1]


def _panel(picture: dict, panel: str, title: str, left: int, top: float) -> list[str]:
    rows, cols, mask = picture[panel], picture["cols"][0], picture["mask"]
    first_row = picture["rows"][0]
    out = [f"<text x='{left}' y='12' font-size='12' font-weight='bold'>{title}</text>"]
    out += [f"<text x='{left + j * CELL + CELL / 2:.0f}' y='{GRID_TOP - 4}' font-size='8' text-anchor='middle' "
            f"fill='#666'>{cols + j}</text>" for j in range(len(rows[0]))]
    for i, row in enumerate(rows):
        y = GRID_TOP + i * CELL
        out.append(f"<text x='{left - 3}' y='{y + CELL * 0.7:.0f}' font-size='9' text-anchor='end' fill='#666'>"
                   f"{first_row + i}</text>")
        for j, raw in enumerate(row):
            value, x = _number(raw), left + j * CELL
            differs = picture["differ"][i][j]
            stroke = f" stroke='{DIFFER}' stroke-width='2.5'" if differs else " stroke='#fff' stroke-width='0.5'"
            label = f"[{', '.join(map(str, [*picture['slice'], first_row + i, cols + j]))}] = {_shown(value, mask)}"
            out.append(f"<rect x='{x}' y='{y}' width='{CELL}' height='{CELL}' fill='{_fill(value, top, mask)}'{stroke}>"
                       f"<title>{html.escape(label + (' (differs)' if differs else ''))}</title></rect>")
            glyph = "" if mask or math.isfinite(value) else NON_FINITE[_kind(value)][2]
            if glyph:  # short enough for a cell; NaN is told by its colour and the legend
                out.append(f"<text x='{x + CELL / 2:.0f}' y='{y + CELL * 0.7:.0f}' font-size='9' "
                           f"text-anchor='middle' fill='#fff'>{glyph}</text>")
    return out


def _swatch(left: int, y: int, fill: str, label: str, outline: str = "") -> tuple[list[str], int]:
    """A legend entry; returns it and the x where the next one starts."""
    stroke = f" fill='none' stroke='{outline}' stroke-width='2.5'" if outline else f" fill='{fill}' stroke='#ccc'"
    return ([f"<rect x='{left}' y='{y}' width='12' height='12'{stroke}/>",
             f"<text x='{left + 16}' y='{y + 10}' font-size='10'>{html.escape(label)}</text>"],
            left + 22 + 6 * len(label))


def _legend(values: list[float], top: float, mask: bool, left: int, y: int) -> tuple[list[str], int]:
    """The legend's elements and its width."""
    out, x = [], left
    if mask:
        for fill, label in ((MASK_TRUE, "True"), (MASK_FALSE, "False")):
            entry, x = _swatch(x, y, fill, label)
            out += entry
    else:
        steps, low = 11, (-top if any(v < 0 for v in values if math.isfinite(v)) else 0.0)
        out += [f"<rect x='{x + k * 10}' y='{y}' width='10' height='12' "
                f"fill='{_fill(low + (top - low) * k / (steps - 1), top, False)}'/>" for k in range(steps)]
        out += [f"<text x='{x}' y='{y + 24}' font-size='10'>{low:.3g}</text>",
                f"<text x='{x + steps * 10}' y='{y + 24}' font-size='10' text-anchor='end'>{top:.3g}</text>"]
        x += steps * 10 + 16
        for kind, (fill, label, _) in NON_FINITE.items():
            if any(not math.isfinite(v) and _kind(v) == kind for v in values):
                entry, x = _swatch(x, y, fill, label)
                out += entry
    entry, x = _swatch(x, y, "", "differs", outline=DIFFER)
    return out + entry, x - left


def heatmap_svg(picture: dict) -> str:
    """Yours and expected side by side, as one inline ``<svg>`` element."""
    n_rows, n_cols = len(picture["expected"]), len(picture["expected"][0])
    values = _values(picture)
    top = _scale(values)
    width = n_cols * CELL
    left = 22
    legend_y = GRID_TOP + n_rows * CELL + 8
    legend, legend_width = _legend(values, top, picture["mask"], left, legend_y)
    where = "".join(f"{i}, " for i in picture["slice"])
    drawn = f"[{where}{picture['rows'][0]}:{picture['rows'][1]}, {picture['cols'][0]}:{picture['cols'][1]}]"
    shape = f" of a tensor of shape ({', '.join(map(str, picture['shape']))})" if "shape" in picture else ""
    caption = f"drawn: {drawn}{shape}, yours and the expected one"
    caption_y = legend_y + 40
    body = [*_panel(picture, "actual", "yours", left, top),
            *_panel(picture, "expected", "expected", left + width + GAP, top), *legend,
            f"<text x='{left}' y='{caption_y}' font-size='10' fill='#444'>{html.escape(caption)}</text>"]
    total_width = max(left + 2 * width + GAP + 4, left + legend_width + 4, left + 6 * len(caption))
    height = caption_y + 8
    return (f"<svg xmlns='http://www.w3.org/2000/svg' class='heatmap' width='{total_width}' height='{height}' "
            f"viewBox='0 0 {total_width} {height}' role='img' aria-label='{html.escape(caption)}'>"
            f"<title>{html.escape(caption)}</title>{''.join(body)}</svg>")
