"""Near-copies among a cohort's submissions, module by module, with copydetect (winnowed token
fingerprints, as MOSS: variable names, literals and comments do not count, so renaming hides
nothing). The release's stub of each module is boilerplate: the code every student was given
never counts as shared.

Reads the staged copies of the submissions (regular files the batch already checked), never the
students' folders themselves.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import numpy as np
from copydetect.detector import CodeFingerprint, compare_files
from copydetect.utils import highlight_overlap

from autograder.lab import Lab
from autograder.text import one_line, printable

# copydetect's defaults: fingerprints are 25-token k-grams, and any run of 30 shared tokens is found.
NOISE, GUARANTEE = 25, 30
WINDOW = GUARANTEE - NOISE + 1
# Pairs sharing more than this fraction of *both* modules' own tokens are listed. Measured on the
# kit's demo cohort: independently written correct modules share 0.13-0.24 of their tokens with
# the reference; a copy with renamed variables shares nearly all (tests/test_similarity.py).
THRESHOLD = 0.6
HIGHLIGHT = ("<mark>", "</mark>")


def fingerprint(text: str, name: str, boilerplate) -> CodeFingerprint:
    return CodeFingerprint(name, NOISE, WINDOW, boilerplate=boilerplate, fp=io.StringIO(printable(text)))


def stub_hashes(lab: Lab, module: str):
    """The fingerprints of the code the release gives (every k-gram, as copydetect does for boilerplate)."""
    stub = lab.release / module
    return np.unique(np.array(list(CodeFingerprint(str(stub), NOISE, 1).hashes))) if stub.is_file() else []


REFERENCE = None  # the reference solution's key among the students': no folder name can be None
SHOWN_SIDE_BY_SIDE = 40  # pairs whose code the report shows; the rest are listed


def name_of(student: str | None) -> str:
    return "the reference solution" if student is REFERENCE else one_line(student)


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


def similarity(lab: Lab, staged: dict[str, Path], threshold: float = THRESHOLD) -> dict:
    """``{"pairs": [...], "groups": [...]}``. A pair: ``{"module", "first", "second", "similarity"}``,
    most similar first. A group: ``{"module", "members", "with_reference", "pairs"}``, the students
    (and the reference solution, when a submission copies it) linked by such pairs in one module,
    groups of students alone first; its ``pairs`` are the closest ones (:func:`closest_pairs`),
    the first of them with ``first_code`` and ``second_code``: HTML-escaped, the shared stretches
    in ``<mark>``."""
    pairs, groups = [], []
    for module in lab.modules:
        boilerplate = stub_hashes(lab, module)
        sources = [(student, folder / module) for student, folder in sorted(staged.items())]
        sources.append((REFERENCE, lab.reference / module))
        prints = {}
        for student, path in sources:
            if path.is_file() and not path.is_symlink():
                try:
                    prints[student] = fingerprint(path.read_bytes().decode("utf-8", errors="replace"), module, boilerplate)
                except Exception:  # noqa: BLE001 - code the tokenizer cannot read is compared with no one, nothing more
                    continue
        found, linked = [], {student: {student} for student in prints}
        for (a, first), (b, second) in itertools.combinations(prints.items(), 2):
            overlap, (share_a, share_b), slices = compare_files(first, second)
            shared = float(min(share_a, share_b))
            if overlap and shared > threshold:
                found.append({"module": module, "first": name_of(a), "second": name_of(b), "similarity": shared,
                              "keys": (a, b), "prints": (first, second), "slices": slices})
                group = linked[a] | linked[b]
                for member in group:
                    linked[member] = group
        for group in {id(g): g for g in linked.values() if len(g) > 1}.values():
            members = sorted(group, key=lambda m: (m is REFERENCE, m or ""))
            groups.append({"module": module, "members": [name_of(m) for m in members],
                           "with_reference": REFERENCE in group,
                           "pairs": closest_pairs(group, [p for p in found if p["keys"][0] in group])})
        pairs += found
    groups.sort(key=lambda g: (g["with_reference"], -len(g["members"]), g["module"]))
    shown = 0
    for pair in (pair for group in groups for pair in group["pairs"]):
        if shown < SHOWN_SIDE_BY_SIDE:
            (first, second), (slices_a, slices_b) = pair["prints"], pair["slices"]
            pair["first_code"] = highlight_overlap(first.raw_code, slices_a, *HIGHLIGHT, escape_html=True)[0]
            pair["second_code"] = highlight_overlap(second.raw_code, slices_b, *HIGHLIGHT, escape_html=True)[0]
            shown += 1
    for pair in pairs:
        for internal in ("keys", "prints", "slices"):
            del pair[internal]
    return {"pairs": sorted(pairs, key=lambda p: -p["similarity"]), "groups": groups}
