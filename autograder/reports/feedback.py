"""A student's feedback, from their record: ``feedback.html`` (a page that opens anywhere: no
server, no network, no script) and ``feedback.md`` (also the top of Gradescope's ``results.json``,
:mod:`autograder.platforms.gradescope`), all from one view (:func:`feedback_view`), so they say the same.

The view puts first what the student acts on: a summary table; per part the known mistake once,
with its hint, at the top; the failed public checks with their messages and, where the values are
a matrix, a picture of theirs beside the expected one; passing checks folded away. Hidden checks
are named with what they check, nothing more, and only where grades are published (``hidden``).
"""

from __future__ import annotations

import base64

import jinja2
import mistune
from markupsafe import Markup

from autograder.judge.dependencies import dependencies, dependency_label, dependency_sentence, stand_ins
from autograder.lab import Lab
from autograder.reports.heatmap import heatmap_svg
from autograder.reports.records import hidden_line
from autograder.results import NOT_HANDED_IN, UNCONFINED_WARNING, CheckResult, SubmissionResult, total
from autograder.text import markdown_block, markdown_span, one_line, printable, relation_sentence

# Every value a page shows is made printable, then escaped: autoescape alone leaves control and
# bidi characters (a file name's ESC or U+202E) raw in the page. Markup is HTML the kit built.
TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("autograder.reports"), autoescape=True,
                               undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                               finalize=lambda value: printable(value) if isinstance(value, str)
                               and not isinstance(value, Markup) else value)
# Markdown of the lab's own texts (hints, titles): raw HTML in it is shown as text, never run.
TEMPLATES.filters["markdown"] = lambda text: Markup(mistune.create_markdown(escape=True)(text))
TEMPLATES.filters["heatmap"] = lambda picture: Markup(heatmap_svg(picture))


def compile_templates() -> None:
    """Compile the pages' templates now (Jinja2 keeps them): a batch does it while its lanes grade."""
    for name in TEMPLATES.list_templates(extensions=["html"]):
        TEMPLATES.get_template(name)


def state(got: float, out_of: float) -> str:
    """How a score reads at a glance (a CSS class and a word): full, partial or none."""
    return "full" if got >= out_of else "partial" if got > 0 else "none"


def diagnosis(check: CheckResult) -> tuple:
    """What a wrong answer was seen to be: the relation of its values to the expected ones and the
    known mistakes it matches; () when nothing was seen (its own picture is then the only clue)."""
    relation = check.failure.relation if check.failure else ""
    ids = sorted(d.id for d in check.diagnoses)
    return (relation or None, *ids) if relation or ids else ()


def once_per_fact(failed: list[CheckResult]) -> list[dict]:
    """The failed public checks as the feedback lists them: one entry each, except that checks failing
    with the same message of a kind said once (``Kind.said_once``: a module that does not import,
    is missing, a function not implemented yet) share the first one's entry (its points summed).
    Wrong answers keep an entry each (their values differ), but a diagnosis is explained once: the
    first check seen to be, say, transposed keeps the sentence and names the others (``same``), the
    first of them with a picture keeps its picture; the rest leave both out."""
    shown: list[dict] = []
    first: dict[tuple[str, str], dict] = {}  # (kind, message): its entry
    explained: dict[tuple, dict] = {}  # a diagnosis: the entry that explains it
    pictured: set[tuple] = set()  # the diagnoses whose picture is shown
    for check in failed:
        entry = {"name": check.name, "points": check.points, "about": check.about,
                 "message": printable(check.message.strip()), "picture": check.failure.picture if check.failure else None,
                 "also": [], "same": []}
        kind = check.kind
        said_once = kind is not None and kind.meaning.said_once
        if said_once and (kind, entry["message"]) in first:
            shared = first[kind, entry["message"]]
            shared["also"].append(check.name)
            shared["points"] = round(shared["points"] + check.points, 6)
            shared["about"] = ""  # what one check checks no longer describes the entry
            continue
        if said_once:
            first[kind, entry["message"]] = entry
        seen = diagnosis(check)
        if seen in explained:
            explained[seen]["same"].append(check.name)
            if seen[0]:  # the relation
                entry["message"] = entry["message"].replace(printable(relation_sentence(seen[0])), "")
        elif seen:
            explained[seen] = entry
        if seen and entry["picture"]:
            if seen in pictured:
                entry["picture"] = None
            pictured.add(seen)
        shown.append(entry)
    return shown


def same(check: dict, name=str) -> str:
    """What an entry that explains a diagnosis says of the checks sharing it (``name``: how a check's
    name is written)."""
    names = check["same"]
    return (f"The same diagnosis holds for {len(names)} more check{'s' if len(names) > 1 else ''} below "
            f"(not repeated there): {', '.join(name(n) for n in names)}.") if names else ""


def also(check: dict) -> str:
    """`` and N more checks`` for an entry that speaks for several checks."""
    more = len(check["also"])
    return f" and {more} more check{'s' if more > 1 else ''}" if more else ""


def feedback_view(lab: Lab, record: SubmissionResult, hidden: bool = True) -> dict:
    """Everything the feedback shows, in order. With ``hidden=False`` nothing about hidden checks
    (Gradescope's top-level output, visible before grades are published): points are public ones."""
    everything = record.checks
    seen = [c for c in everything if hidden or not c.hidden]
    parts = []
    for part in lab.part_ids:
        checks = [c for c in seen if c.part == part]
        public = [c for c in checks if not c.hidden]
        secret = [c for c in checks if c.hidden]
        got = total(checks, earned=True)
        out_of = total(checks) if everything else record.parts[part].max_points  # checks never ran
        failed = [c for c in public if not c.passed]
        mistakes = []
        for mistake in record.parts[part].misconceptions:
            matched = [c for c in checks if not c.passed and mistake["id"] in {d.id for d in c.diagnoses}]
            mistakes.append({**mistake, "public": sum(not c.hidden for c in matched),
                             "hidden": sum(c.hidden for c in matched)})
        parts.append({
            "id": part, "title": lab.part(part).title, "points": got, "max_points": out_of,
            "state": state(got, out_of), "passed": sum(c.passed for c in checks), "checks": len(checks),
            # Ordered by what this view counts: before publication, the order must not tell what
            # hidden checks matched (a student could make that depend on a hidden input).
            "mistakes": sorted((m for m in mistakes if m["public"] or m["hidden"]),
                               key=lambda m: (-(m["public"] + m["hidden"]), m["id"])),
            "depends": [{"label": dependency_label(d), "sentence": dependency_sentence(part, d)}
                        for d in dependencies(lab, part, seen)] + stand_ins(part, seen),
            "failed": once_per_fact(failed),
            "passed_checks": [c.name for c in public if c.passed],
            "hidden": {"passed": sum(c.passed for c in secret), "total": len(secret),
                       "failed": [{"name": c.name, "line": hidden_line(c)} for c in secret if not c.passed]},
        })
    got, out_of = total(seen, earned=True), round(sum(part["max_points"] for part in parts), 6)
    status = record.status if hidden else record.public_status
    return {"lab": lab.title, "student": one_line(record.student), "hidden": hidden,
            "handed_in": record.handed_in, "total": got, "max_total": out_of, "state": state(got, out_of),
            "status": "" if status in ("graded", NOT_HANDED_IN) else status, "notes": record.notes, "parts": parts,
            "unconfined": UNCONFINED_WARNING if record.unconfined else "", "looked_for": looked_for(lab),
            "folder": lab.name, "modules": lab.modules}


def looked_for(lab: Lab) -> str:
    """What a submission of ``lab`` is looked for as, in the student's words (said when none was found)."""
    return (f"a folder `{lab.name}/` holding your modules ({', '.join(f'`{m}`' for m in lab.modules)}) or the "
            "lab's notebook")


def picture_markdown(picture: dict) -> str:
    """The picture as a Markdown image: the SVG inside a data URI, so the file stays self-contained."""
    svg = base64.b64encode(heatmap_svg(picture).encode()).decode()
    return f"![your values beside the expected ones](data:image/svg+xml;base64,{svg})"


def feedback_markdown(lab: Lab, record: SubmissionResult, hidden: bool = True, picture=picture_markdown) -> str:
    """The feedback page in Markdown; ``picture(check's picture)`` draws a failed comparison (by default an
    image in a data URI; Classroom 50's Release, which GitHub renders without data URIs, gets text)."""
    view = feedback_view(lab, record, hidden)
    heading = f"{view['total']:g} / {view['max_total']:g}" if hidden else \
        f"public checks {view['total']:g} / {view['max_total']:g} (hidden checks: after grades are published)"
    if not view["handed_in"]:
        heading = f"{NOT_HANDED_IN}, {view['total']:g} / {view['max_total']:g}"
    lines = [f"# {lab.title}: {heading}", ""]
    if view["unconfined"]:
        lines += [f"**{view['unconfined']}**", ""]
    if not view["handed_in"]:  # six empty parts would explain nothing: what was looked for, and found
        found = "only what the notes below list" if view["notes"] else f"no `{lab.name}/` folder, or an empty one"
        lines += [f"Nothing of this lab was found in your submission. Looked for {view['looked_for']}; found {found}.",
                  ""]
    lines += ["| part | points | checks passed |", "|---|---:|---:|"]
    lines += [f"| {p['id']} | {p['points']:g} / {p['max_points']:g} | {p['passed']} / {p['checks']} |" for p in view["parts"]]
    lines += [f"| **total** | **{view['total']:g} / {view['max_total']:g}** | |", ""]
    if view["status"]:
        lines += ["**What cost points beyond wrong answers:**", "", markdown_block(view["status"]), ""]
    if view["notes"]:
        lines += ["**Notes** (these cost nothing):", "", markdown_block("\n".join(view["notes"])), ""]
    for part in view["parts"] if view["handed_in"] else ():
        lines += [f"## {part['id']}: {part['points']:g} / {part['max_points']:g}", ""]
        for mistake in part["mistakes"]:
            lines += [f"**Known mistake: {mistake['title']}** ({matched(mistake, hidden)}). {mistake['hint']}", ""]
        lines += [f"- **{d['label']}**: {d['sentence']}" for d in part["depends"]]
        for check in part["failed"]:
            message = markdown_block(check["message"]).replace("\n", "\n  ")
            others = f" ({', '.join(markdown_span(name) for name in check['also'])})" if check["also"] else ""
            lines.append(f"- ✗ {markdown_span(check['name'])}{also(check)}{others} ({check['points']:g} pt):\n\n"
                         f"  {message}\n")
            if check["picture"]:
                lines.append(f"  {picture(check['picture'])}\n")
            if check["same"]:
                lines.append(f"  {same(check, markdown_span)}\n")
        if hidden and part["hidden"]["total"]:
            lines.append(f"- hidden checks: {part['hidden']['passed']} of {part['hidden']['total']} passed")
            lines += [f"  - ✗ {markdown_span(c['name'])}: {markdown_span(c['line'])}" for c in part["hidden"]["failed"]]
        if part["passed_checks"]:
            lines.append(f"- ✓ {len(part['passed_checks'])} public check{'s' if len(part['passed_checks']) > 1 else ''} "
                         f"passed: {', '.join(markdown_span(name) for name in part['passed_checks'])}")
        lines.append("")
    return "\n".join(lines)


def matched(mistake: dict, hidden: bool) -> str:
    """How many failed checks a known mistake explains, counting only the ones this feedback lists."""
    said = f"matches {mistake['public']} failed check{'s' if mistake['public'] != 1 else ''} below"
    return said + (f" and {mistake['hidden']} hidden" if hidden and mistake["hidden"] else "")


def feedback_html(lab: Lab, record: SubmissionResult) -> str:
    view = feedback_view(lab, record)
    return TEMPLATES.get_template("feedback.html").render(view=view, matched=matched, also=also, same=same)
