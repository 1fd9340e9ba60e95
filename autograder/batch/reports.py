"""The grader's outputs: per student ``results.json`` (Gradescope), ``feedback.md``/``.html`` and
``summary.json`` (for the instructor's tables); for the class ``grades.csv`` and ``report.html``.

Hidden checks appear by name and points only: their messages, inputs and expected values
never reach a file a student can see.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

from autograder.files import write_atomically
from autograder.judge.dependencies import dependencies, dependency_sentence
from autograder.lab import Lab
from autograder.text import csv_cell, markdown_block, markdown_span, one_line

# Failure kinds that cost points beyond a wrong answer, as the status column names them.
PROBLEM_NAMES = {"timeout": "timed out", "memory": "out of memory", "protocol": "broke the protocol",
                 "bad_value": "unreadable answer", "too_large": "unreadable answer", "check_error": "a check broke"}


def problem(failure: dict) -> tuple[str, str] | None:
    """How a failed check's failure reads in the status column, as (what went wrong, where); None
    for the ordinary ones (a wrong answer, an exception, a stub), which the points already say."""
    kind, where = failure.get("kind"), failure.get("where", "?")
    if kind == "timeout" and failure.get("loading"):
        return "timed out", f"loading {', '.join(failure['loading'])}"
    if kind == "crashed":
        how = failure.get("signal") or (f"exit code {failure['exit_code']}" if "exit_code" in failure else "stopped")
        return "crashed", f"{where} ({how})"
    if kind == "import":
        return "did not import", failure.get("file", where) + (f" line {failure['line']}" if "line" in failure else "")
    if kind == "missing" and failure.get("file"):
        return "missing", failure["file"]
    return (PROBLEM_NAMES[kind], where) if kind in PROBLEM_NAMES else None


def status_of(raw: dict | None, problems: list[str], error: str | None) -> str:
    """``graded`` when nothing went wrong; otherwise what cost points beyond wrong answers."""
    if error:
        return "error: " + one_line(error.strip().splitlines()[-1][:200])
    found: dict[str, list[str]] = {}  # "timed out": ["<module>.<function>", ...]
    failures = [problem(c.get("failure") or {}) for c in (raw or {}).get("checks", []) if not c["passed"]]
    for kind, what in [*(said.partition(": ")[::2] for said in problems), *filter(None, failures)]:
        if what not in found.setdefault(kind, []):
            found[kind].append(what)
    said = [f"{kind}: {', '.join(what)}" if any(what) else kind for kind, what in found.items()]
    return one_line("; ".join(said)) if said else "graded"


def student_record(lab: Lab, student: str, raw: dict | None, problems: list[str], notes: list[str],
                   error: str | None, seconds: float) -> dict:
    """Everything the reports need about one student, from the lane's raw results."""
    order = lab.part_ids  # the teaching order
    checks = sorted(raw["checks"] if raw else [], key=lambda c: order.index(c["part"]))
    parts = {part: {"points": 0.0, "max_points": 0.0} for part in order}
    for part, row in (raw or {}).get("parts", {}).items():
        parts[part] = {"points": row["points"], "max_points": row["max_points"]}
    for part in order:
        parts[part]["misconceptions"] = misconceptions([c for c in checks if c["part"] == part and not c["passed"]])
    return {
        "lab": lab.name,
        "student": student,
        "status": status_of(raw, problems, error),
        "notes": [*notes, *(raw or {}).get("notes", [])],
        "parts": parts,
        "total": round(sum(p["points"] for p in parts.values()), 6),
        "max_total": round(sum(p["max_points"] for p in parts.values()), 6) or lab.max_points,
        "seconds": round(seconds, 3),
        "checks": [{"part": c["part"], "name": c["check"], "hidden": c["hidden"], "points": c["points"],
                    "passed": c["passed"], "message": "" if c["hidden"] else c["message"], "about": c.get("about", ""),
                    **({} if c["passed"] else {"failure": c.get("failure", {})})} for c in checks],
    }


def misconceptions(failed: list[dict]) -> list[dict]:
    """The known mistakes the failed checks matched, most often matched first."""
    found: dict[str, dict] = {}
    for check in failed:
        for mistake in check.get("diagnoses", []):
            found.setdefault(mistake["id"], {**mistake, "checks": 0})["checks"] += 1
    return sorted(found.values(), key=lambda m: -m["checks"])


def gradescope(lab: Lab, record: dict) -> dict:
    """Gradescope's results.json. Hidden checks are tests visible after publication, each with one
    line saying what it checks; the top-level ``output`` (visible at once) holds the public
    feedback only. Gradescope hides the total while any test is hidden, so it reveals nothing."""
    tests = []
    for check in record["checks"]:
        test = {"name": f"{check['part']}: {check['name']}", "score": check["points"] if check["passed"] else 0.0,
                "max_score": check["points"], "status": "passed" if check["passed"] else "failed",
                "visibility": "after_published" if check["hidden"] else "visible",
                "output": hidden_line(check) if check["hidden"] else check["message"],
                "output_format": "text"}  # the student's own words, shown as they are, never as Markdown or HTML
        tests.append(test)
    return {"score": record["total"], "execution_time": record["seconds"],
            "output": feedback_markdown(lab, record, hidden=False), "output_format": "md", "test_output_format": "text",
            "visibility": "visible", "tests": tests}


def points(checks: list[dict], passed: bool = False) -> float:
    """The points of ``checks`` (only of those passed, with ``passed``)."""
    return round(sum(c["points"] for c in checks if c["passed"] or not passed), 6)


def hidden_line(check: dict) -> str:
    """All a student learns about a hidden check: what it checks (never its inputs or expected values)."""
    return f"checks: {check['about']}" if check.get("about") else "a hidden check"


def feedback_markdown(lab: Lab, record: dict, hidden: bool = True) -> str:
    """The student's feedback; with ``hidden=False`` nothing about hidden checks (Gradescope's
    top-level output, visible before grades are published)."""
    public = [c for c in record["checks"] if not c["hidden"]]
    title = f"{record['total']:g} / {record['max_total']:g}" if hidden else \
        f"public checks {points(public, passed=True):g} / {points(public):g} (hidden checks: after grades are published)"
    lines = [f"# {lab.title}: {title}", ""]
    if record["status"] != "graded":
        lines += ["**What cost points beyond wrong answers:**", "", markdown_block(record["status"]), ""]
    if record["notes"]:
        lines += ["**Notes** (these cost nothing):", "", markdown_block("\n".join(record["notes"])), ""]
    for part in lab.part_ids:
        row = record["parts"][part]
        checks = [c for c in record["checks"] if c["part"] == part]
        shown = [c for c in checks if hidden or not c["hidden"]]
        lines += [f"## {part}: {row['points']:g} / {row['max_points']:g}" if hidden else
                  f"## {part}: {points(shown, passed=True):g} / {points(shown):g}", ""]
        lines += [f"- **depends on {d['part']}**: {dependency_sentence(part, d)}"
                  for d in dependencies(lab, part, [c for c in record["checks"] if hidden or not c["hidden"]])]
        for check in checks:
            if check["hidden"]:
                continue
            if not check["passed"]:
                message = markdown_block(check["message"].strip()).replace("\n", "\n  ")
                lines.append(f"- ✗ {markdown_span(check['name'])} ({check['points']:g} pt):\n\n  {message}\n")
        for mistake in row.get("misconceptions", []):
            lines.append(f"- known mistake: **{mistake['title']}** (matches {mistake['checks']} failed "
                         f"check{'s' if mistake['checks'] > 1 else ''}). {mistake['hint']}")
        secret = [c for c in checks if c["hidden"]] if hidden else []
        if secret:
            passed = sum(c["passed"] for c in secret)
            lines.append(f"- hidden checks: {passed} of {len(secret)} passed")
            lines += [f"  - {'✓' if c['passed'] else '✗'} {markdown_span(c['name'])}"
                      + ("" if c["passed"] else f": {markdown_span(hidden_line(c))}") for c in secret]
        if all(c["passed"] for c in shown) and shown:
            lines.append("- every check passed")
        lines.append("")
    return "\n".join(lines)


def markdown_to_html(title: str, markdown: str) -> str:
    """The feedback's few Markdown forms (headings, bullets, code spans, fenced blocks of the
    student's text) as a standalone page; every piece of text is escaped."""
    body, block = [], None
    for line in markdown.split("\n"):
        fence = re.fullmatch(r"\s*(`{3,})(text)?", line)
        if block is not None:
            if fence and fence.group(1) == block[0]:
                body.append(f"<pre>{html.escape(chr(10).join(block[1]))}</pre>")
                block = None
            else:
                block[1].append(line.removeprefix("  "))
            continue
        if fence:
            block = (fence.group(1), [])
            continue
        text = html.escape(line.lstrip("#- ").strip())
        text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
        text = re.sub(r"(`+) ?(.+?) ?\1", r"<code>\2</code>", text)
        if line.startswith("# "):
            body.append(f"<h1>{text}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{text}</h2>")
        elif line.lstrip().startswith("- "):
            body.append(f"<li>{text}</li>")
        elif line.strip():
            body.append(f"<p>{text}</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}li{margin:.3em 0}"
            "pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}</style>"
            f"</head><body>{''.join(body)}</body></html>")




def write_student(lab: Lab, folder: Path, record: dict) -> None:
    write_atomically(folder / "summary.json", json.dumps(record, indent=1))
    write_atomically(folder / "results.json", json.dumps(gradescope(lab, record), indent=1))
    markdown = feedback_markdown(lab, record)
    write_atomically(folder / "feedback.md", markdown)
    write_atomically(folder / "feedback.html", markdown_to_html(f"Feedback for {one_line(record['student'])}", markdown))


def load_record(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def grades_csv(lab: Lab, records: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *lab.part_ids, "total", "max_total", "status", "notes"])
    for record in sorted(records, key=lambda r: r["student"]):
        writer.writerow([csv_cell(record["student"]), *(f"{record['parts'][p]['points']:g}" for p in lab.part_ids),
                         f"{record['total']:g}", f"{record['max_total']:g}", csv_cell(record["status"]),
                         csv_cell(one_line("; ".join(record.get("notes", []))))])
    return out.getvalue()


def course_csv(runs: list[dict]) -> str:
    """The course's table: one row per student, one total per lab graded (0 for a lab not handed in)."""
    labs = [run["lab"] for run in runs]
    totals = {(run["lab"], record["student"]): record["total"] for run in runs for record in run["records"]}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *labs, "total"])
    for student in sorted({student for _, student in totals}):
        mine = [totals.get((lab, student), 0.0) for lab in labs]
        writer.writerow([csv_cell(student), *(f"{t:g}" for t in mine), f"{round(sum(mine), 6):g}"])
    return out.getvalue()


def histogram_svg(totals: list[float], maximum: float, width: int = 520, height: int = 180) -> str:
    """Totals in ten bins of a tenth of ``maximum`` each, as an inline SVG bar chart."""
    bins = [0] * 10
    step = maximum / 10
    for total in totals:
        bins[min(int(total // step), 9)] += 1
    top = max(bins) or 1
    bar = width / 10
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 30}' role='img' "
             "aria-label='score distribution'>"]
    for i, count in enumerate(bins):
        h = height * count / top
        parts.append(f"<rect x='{i * bar + 2:.0f}' y='{height - h:.0f}' width='{bar - 4:.0f}' height='{h:.0f}' "
                     f"fill='#4c78a8'><title>{i * step:g}-{(i + 1) * step:g}: {count}</title></rect>")
        parts.append(f"<text x='{i * bar + bar / 2:.0f}' y='{height + 15}' font-size='11' text-anchor='middle'>"
                     f"{i * step:g}</text>")
        if count:
            parts.append(f"<text x='{i * bar + bar / 2:.0f}' y='{height - h - 3:.0f}' font-size='11' "
                         f"text-anchor='middle'>{count}</text>")
    parts.append("</svg>")
    return "".join(parts)


def student_row(lab: Lab, record: dict) -> str:
    cells = [html.escape(one_line(record["student"])), *(f"{record['parts'][p]['points']:g}" for p in lab.part_ids),
             f"<b>{record['total']:g}</b>", html.escape(record["status"])]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def class_report(lab: Lab, records: list[dict]) -> str:
    """The class at a glance, one self-contained HTML file."""
    n = len(records)
    totals = [r["total"] for r in records]
    rates: dict[tuple[str, str], list[int]] = {}
    for record in records:
        for check in record["checks"]:
            rates.setdefault((check["part"], check["name"]), []).append(int(check["passed"]))
    rows = sorted(((sum(v) / len(v), part, name) for (part, name), v in rates.items()), key=lambda r: (r[0], r[1]))
    e = html.escape
    worst = "".join(f"<li>{e(part)}: <code>{e(name)}</code> passed by {rate:.0%}</li>" for rate, part, name in rows[:10])
    table = "".join(f"<tr><td>{e(part)}</td><td><code>{e(name)}</code></td><td>{rate:.0%}</td></tr>"
                    for rate, part, name in sorted(rows, key=lambda r: (lab.part_ids.index(r[1]), r[2])))
    common: dict[str, list] = {}
    for record in records:
        for part in lab.part_ids:
            for mistake in record["parts"][part].get("misconceptions", []):
                common.setdefault(mistake["id"], [mistake, 0])[1] += 1
    mistakes = "".join(f"<li>{e(m['title'])} ({e(m['id'])}): {count} student{'s' if count > 1 else ''}</li>"
                       for m, count in sorted(common.values(), key=lambda mc: -mc[1])) or "<li>none diagnosed</li>"
    students = "".join(student_row(lab, r) for r in sorted(records, key=lambda r: r["student"]))
    mean = sum(totals) / n if n else 0
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{e(lab.title)}: class report</title>
<style>body{{font-family:sans-serif;max-width:70em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}</style></head><body>
<h1>{e(lab.title)}: class report</h1>
<p>{n} students; mean {mean:.1f} / {lab.max_points:g}; {sum(t == lab.max_points for t in totals)} at full marks.</p>
<h2>Score distribution</h2>{histogram_svg(totals, lab.max_points)}
<h2>Most failed checks</h2><ol>{worst}</ol>
<h2>Most common misconceptions</h2><ul>{mistakes}</ul>
<h2>Students</h2><table><tr><th>student</th>{"".join(f"<th>{p}</th>" for p in lab.part_ids)}<th>total</th><th>status</th></tr>
{students}</table>
<h2>Pass rate per check</h2><table><tr><th>part</th><th>check</th><th>passed by</th></tr>{table}</table>
</body></html>"""
