"""Near-copies among a cohort's submissions, module by module, with copydetect (winnowed token
fingerprints, as MOSS: variable names, literals and comments do not count, so renaming hides
nothing).

Only what students wrote is compared: docstrings, comments and every line the release gives word
for word are blanked out first (:func:`own_code`). A pair is judged against the cohort's own
baseline for that module, the median share of its pairs: where short correct answers converge
(a typical pair shares at least :data:`CONVERGED`), sharing much says nothing and no pair is listed;
elsewhere only a pair far above the baseline is (:func:`stands_out`). The pairs listed in any module
link students into groups, one finding per group however many modules they share (:func:`groups_of`).

Compares the staged copies of the submissions, never the students' folders themselves
(:mod:`autograder.reports.staged_code`).
"""

from __future__ import annotations

import hashlib
import itertools
import statistics
from pathlib import Path

import numpy as np
from copydetect.detector import CodeFingerprint, compare_files
from copydetect.utils import filter_code, get_token_coverage, winnow
from markupsafe import escape
from pygments.lexers import PythonLexer
from pygments.token import Comment, String, Whitespace

from autograder.lab import Lab
from autograder.reports.staged_code import REFERENCE, module_sources, module_text
from autograder.text import one_line

# copydetect's defaults: fingerprints are 25-character k-grams of the filtered code (each name one
# character), and any run of 30 shared characters is found.
NOISE, GUARANTEE = 25, 30
WINDOW = GUARANTEE - NOISE + 1
# A pair is listed when it shares more than this fraction of *both* modules' own code, and more
# than half the way from the module's baseline to everything (:func:`stands_out`). Measured on the
# kit's demo cohort: independently written modules share 0-0.5, its renamed copy nearly all
# (tests/test_reports.py).
THRESHOLD = 0.6
# Fewer pairs than this make no baseline (a median of two says nothing): the threshold alone decides.
BASELINE_PAIRS = 6
SHOWN_SIDE_BY_SIDE = 40  # modules of pairs whose code the report shows; the rest are listed


class StableFingerprint(CodeFingerprint):
    """copydetect's fingerprint of a module's code, with a hash that is the same in every process.
    copydetect hashes each k-gram with Python's ``hash()``, salted per process (PYTHONHASHSEED), so
    which k-grams winnowing keeps, and every share, moved between two runs on the same files (by up
    to 0.1 on the demo cohort); the same run must give the same report."""

    def __init__(self, name: str, code: str):  # not CodeFingerprint's: it would winnow hash()'s values first
        self.filename, self.raw_code, self.k = name, code, NOISE
        # A lab's modules are Python: its lexer by name, not by matching every lexer's file patterns (0.2 s a run).
        self.filtered_code, self.offsets = filter_code(code, name, "python")
        # copydetect's tokenizer (Pygments' get_tokens) drops leading newlines: its slices start after them.
        self.lead = len(code) - len(code.lstrip("\n"))
        grams = [self.filtered_code[i:i + NOISE] for i in range(len(self.filtered_code) - NOISE + 1)]
        self.hash_idx: dict[int, list[int]] = {}
        if grams:
            hashes = np.array([int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little",
                                              signed=True) for gram in grams], dtype=np.int64)
            for value, index in zip(*(kept.tolist() for kept in winnow(hashes, WINDOW, remove_duplicates=False))):
                self.hash_idx.setdefault(value, []).append(index)
        self.hashes = set(self.hash_idx)
        self.token_coverage = get_token_coverage(self.hash_idx, NOISE, len(self.filtered_code))


def tokens(text: str) -> list[tuple[int, int, object]]:
    """``(start, end, kind)`` of every token, by Pygments (it reads code Python itself cannot parse)."""
    return [(start, start + len(value), kind) for start, kind, value in PythonLexer().get_tokens_unprocessed(text)]


def blank(text: str, spans) -> str:
    """``text`` with the characters of ``spans`` turned into spaces (newlines kept: positions hold)."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = [c if c == "\n" else " " for c in chars[start:end]]
    return "".join(chars)


def given_lines(stub: Path) -> set[str]:
    """The release's code lines of a module, stripped, without its docstrings and comments."""
    if not stub.is_file():
        return set()
    return {line.strip() for line in own_code(module_text(stub.read_bytes()), set()).splitlines() if line.strip()}


def own_code(text: str, given: set[str]) -> str:
    """The module with what the student did not write blanked out: docstrings, comments, and every
    line the release gives word for word (imports, signatures; a comment of the student's after one
    does not make it theirs). Spaces replace them and newlines stay, so every position still points
    into the module as handed in."""
    code = blank(text, [(start, end) for start, end, kind in tokens(text) if kind in String.Doc or kind in Comment])
    spans, offset = [], 0
    for line in code.splitlines(keepends=True):
        if line.strip() in given:
            spans.append((offset, offset + len(line)))
        offset += len(line)
    return blank(code, spans)


def highlighted(text: str, own: str, slices) -> str:
    """``text`` HTML-escaped with the shared stretches in ``<mark>``, on token boundaries: a token of
    the student's own code is marked when copydetect's shared slices touch it (their ends, mapped back
    from the filtered code, may fall mid-word), and a stretch never spans given code."""
    marked = [(start, end) for start, end, kind in tokens(own)
              if kind not in Whitespace and own[start:end].strip()
              and any(start < b and a < end for a, b in zip(*slices))]
    runs: list[list[int]] = []
    for start, end in marked:
        if runs and not text[runs[-1][1]:start].strip():  # only whitespace between: one stretch
            runs[-1][1] = end
        else:
            runs.append([start, end])
    html, done = [], 0
    for start, end in runs:
        html += [str(escape(text[done:start])), "<mark>", str(escape(text[start:end])), "</mark>"]
        done = end
    return "".join(html + [str(escape(text[done:]))])


def name_of(student: str | None) -> str:
    return "the reference solution" if student is REFERENCE else one_line(student)


def baseline_of(shares: list[float]) -> float | None:
    """What a typical pair of students shares in a module: the median, when there are enough pairs."""
    return statistics.median(shares) if len(shares) >= BASELINE_PAIRS else None


def stands_out(shared: float, baseline: float | None, threshold: float = THRESHOLD) -> bool:
    """Listed: beyond the threshold, and more than half the way from the baseline to everything (a
    module whose typical pair shares 80% lists only pairs sharing more than 90%)."""
    return shared > max(threshold, (baseline or 0.0) + (1 - (baseline or 0.0)) / 2)


# A baseline this high says most of the class hands in the same code: short answers that converge, or
# code passed around. No pair stands out then, so the report says it of the module.
CONVERGED = 0.6


def closest_pairs(members: set, pairs: list[dict]) -> list[dict]:
    """The pairs that tie a group together, most similar first: each member linked to the one it is
    closest to (a maximum spanning tree), so a group of n shows n - 1 pairs, not n(n - 1) / 2."""
    joined = {member: member for member in members}

    def root(member):
        while joined[member] != member:
            member = joined[member]
        return member

    kept = []
    for pair in sorted(pairs, key=lambda p: -p["similarity"]):
        a, b = root(pair["keys"][0]), root(pair["keys"][1])
        if a != b:
            joined[a] = b
            kept.append(pair)
    return kept


def fingerprints(lab: Lab, module: str, sources: list[tuple[str | None, bytes]]) -> dict:
    """Each submission's (and the reference's) module: ``{key: (fingerprint of its own code, the
    module as handed in, its own code)}``, for those that wrote any."""
    given = given_lines(lab.release / module)
    prints, made = {}, {}  # made: by text, as many hand in the same one (an untouched stub, the same copy)
    for student, source in sources:
        text = module_text(source)
        if text not in made:
            own = own_code(text, given)
            made[text] = (StableFingerprint(module, own), own)
        fingerprint, own = made[text]
        if fingerprint.hashes:
            prints[student] = (fingerprint, text, own)
    return prints


def similarity(lab: Lab, staged: dict[str, Path], threshold: float = THRESHOLD) -> dict:
    """The near-copies among the staged submissions ``{student: folder}``: :func:`near_copies`."""
    return near_copies(lab, module_sources(lab, staged), threshold)


def near_copies(lab: Lab, sources: dict[str, list[tuple[str | None, bytes]]], threshold: float = THRESHOLD) -> dict:
    """The near-copies among the modules' ``sources`` (:func:`autograder.reports.staged_code.module_sources`):
    ``{"pairs": [...], "groups": [...], "modules": [...], "threshold", "converged"}``.

    ``pairs``: each module's pairs that stand out, most above first: ``{"module", "first", "second", "keys",
    "similarity", "above"}`` (``keys``: the two students' folder names, :data:`REFERENCE` for the reference
    solution; ``above``: how far above the module's baseline, as a share of the way to everything).

    ``groups``: the students (and the reference solution, when a submission copies it) linked by such pairs
    in any module, judged per pair across the lab: a pair near-copied in six modules is one finding. Groups
    of students alone first: ``{"members", "keys", "with_reference", "modules", "pairs", "anchor"}``; its
    ``pairs`` are the closest ones (:func:`closest_pairs`), each ``{"first", "second", "keys", "similarity"``
    (its highest), ``"modules": [{"module", "similarity", "first_code", "second_code"}]}``, the code of the
    first :data:`SHOWN_SIDE_BY_SIDE` modules shown HTML-escaped, the shared stretches in ``<mark>``.

    ``modules``: ``{"module", "compared"`` (students who wrote some of it), ``"baseline"`` (None: too few
    pairs), ``"converged"``, ``"listed"}``."""
    pairs, modules = [], []
    for module in lab.modules:
        prints = fingerprints(lab, module, sources[module])
        compared, known = [], {}  # known: each pair of distinct fingerprints compared once
        for (a, (first, text_a, own_a)), (b, (second, text_b, own_b)) in itertools.combinations(prints.items(), 2):
            if (id(first), id(second)) not in known:
                known[id(first), id(second)] = compare_files(first, second)
            overlap, (share_a, share_b), slices = known[id(first), id(second)]
            compared.append({"module": module, "first": name_of(a), "second": name_of(b),
                             "similarity": float(min(share_a, share_b)) if overlap else 0.0,
                             "keys": (a, b), "texts": (text_a, text_b), "own": (own_a, own_b), "slices": slices,
                             "prints": (first, second)})
        # The reference is not one of the class: a class copying it must not make copying typical.
        baseline = baseline_of([p["similarity"] for p in compared if REFERENCE not in p["keys"]])
        converged = baseline is not None and baseline >= CONVERGED
        # Where the class converges, sharing everything is what a typical pair does: no pair stands out
        # (a module at 97% listed every 100% pair of students who wrote the same short answer).
        found = [] if converged else [p for p in compared if stands_out(p["similarity"], baseline, threshold)]
        for pair in found:
            pair["above"] = (pair["similarity"] - (baseline or 0.0)) / (1 - (baseline or 0.0))
            leads = (fingerprint.lead for fingerprint in pair["prints"])  # copydetect counts after leading newlines
            pair["slices"] = tuple(cut + lead for cut, lead in zip(pair["slices"], leads))
        modules.append({"module": module, "compared": sum(key is not REFERENCE for key in prints),
                        "baseline": baseline, "converged": converged, "listed": len(found)})
        pairs += found
    groups = groups_of(pairs)
    for pair in pairs:
        for internal in ("texts", "own", "slices", "prints"):
            del pair[internal]
    return {"pairs": sorted(pairs, key=lambda p: -p["above"]), "groups": groups, "modules": modules,
            "threshold": threshold, "converged": CONVERGED}


def groups_of(found: list[dict]) -> list[dict]:
    """The groups of :func:`near_copies`, from the pairs that stand out in some module: one pair per two
    students whatever the number of modules they share, its modules most similar first."""
    by_pair: dict[tuple, dict] = {}
    for pair in sorted(found, key=lambda p: (-p["similarity"], p["module"])):
        keys = tuple(sorted(pair["keys"], key=lambda m: (m is REFERENCE, m or "")))
        flip = keys != pair["keys"]
        joined = by_pair.setdefault(keys, {"first": name_of(keys[0]), "second": name_of(keys[1]), "keys": keys,
                                           "similarity": pair["similarity"], "above": pair["above"], "modules": []})
        joined["above"] = max(joined["above"], pair["above"])
        joined["modules"].append({"module": pair["module"], "similarity": pair["similarity"],
                                  **{field: tuple(reversed(pair[field])) if flip else pair[field]
                                     for field in ("texts", "own", "slices")}})
    linked: dict = {}
    for keys in by_pair:
        group = linked.get(keys[0], {keys[0]}) | linked.get(keys[1], {keys[1]})
        for member in group:
            linked[member] = group
    groups = []
    for group in {id(g): g for g in linked.values()}.values():
        members = sorted(group, key=lambda m: (m is REFERENCE, m or ""))
        kept = closest_pairs(group, [p for keys, p in by_pair.items() if keys[0] in group])
        groups.append({"members": [name_of(m) for m in members], "keys": [m for m in members if m is not REFERENCE],
                       "with_reference": REFERENCE in group, "pairs": kept,
                       "modules": sorted({m["module"] for p in kept for m in p["modules"]})})
    groups.sort(key=lambda g: (g["with_reference"], -max(p["above"] for p in g["pairs"]), g["members"]))
    shown = 0
    for number, group in enumerate(groups, 1):
        group["anchor"] = f"similar-{number}"
        for module in (module for pair in group["pairs"] for module in pair["modules"]):
            if shown < SHOWN_SIDE_BY_SIDE:
                module["first_code"], module["second_code"] = (
                    highlighted(text, own, slices)
                    for text, own, slices in zip(module["texts"], module["own"], module["slices"]))
                shown += 1
    for module in (module for pair in by_pair.values() for module in pair["modules"]):
        for internal in ("texts", "own", "slices"):
            del module[internal]
    return groups
