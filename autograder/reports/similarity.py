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


def similarity(lab: Lab, staged: dict[str, Path], threshold: float = THRESHOLD) -> dict:
    """``{"pairs": [...], "groups": [...]}``. A pair: ``{"module", "first", "second", "similarity",
    "first_code", "second_code"}``, most similar first, the code HTML-escaped with the shared
    stretches in ``<mark>`` (for the first pairs only). A group: the students (and the reference
    solution, when a submission copies it) linked by such pairs in one module."""
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
        linked: dict = {student: {student} for student in prints}
        for (a, first), (b, second) in itertools.combinations(prints.items(), 2):
            overlap, (share_a, share_b), slices = compare_files(first, second)
            shared = float(min(share_a, share_b))
            if overlap and shared > threshold:
                pairs.append({"module": module, "first": name_of(a), "second": name_of(b), "similarity": shared,
                              "prints": (first, second), "slices": slices})
                group = linked[a] | linked[b]
                for member in group:
                    linked[member] = group
        for group in {id(g): g for g in linked.values() if len(g) > 1}.values():
            members = sorted(group, key=lambda m: (m is REFERENCE, m or ""))
            groups.append({"module": module, "members": [name_of(m) for m in members]})
    pairs.sort(key=lambda p: -p["similarity"])
    for number, pair in enumerate(pairs):
        (first, second), (slices_a, slices_b) = pair.pop("prints"), pair.pop("slices")
        if number < SHOWN_SIDE_BY_SIDE:
            pair["first_code"] = highlight_overlap(first.raw_code, slices_a, *HIGHLIGHT, escape_html=True)[0]
            pair["second_code"] = highlight_overlap(second.raw_code, slices_b, *HIGHLIGHT, escape_html=True)[0]
    return {"pairs": pairs, "groups": sorted(groups, key=lambda g: (-len(g["members"]), g["module"]))}
