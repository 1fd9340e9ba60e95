"""Labs are folders: the kit's code names no lab, a lab is read from its declaration, and the
course table has one total per lab."""

import csv
import io
import re

import pytest

from autograder.lab import Lab, LabError, all_labs
from conftest import KIT, LAB


def test_autograder_names_no_lab_and_no_part():
    names = {lab.name for lab in all_labs()} | {part for lab in all_labs() for part in lab.part_ids}
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b", re.IGNORECASE)
    found = [f"{path.relative_to(KIT)}:{number}: {line.strip()}"
             for path in sorted((KIT / "autograder").rglob("*")) if path.is_file() and "__pycache__" not in path.parts
             for number, line in enumerate(path.read_text().splitlines(), start=1) if pattern.search(line)]
    assert found == []


def test_every_lab_is_declared_with_parts_whose_weights_are_its_points():
    labs = all_labs()
    assert LAB in labs
    for lab in labs:
        assert lab.parts and all(p.weight > 0 for p in lab.parts), lab
        assert all((lab.source / p.module).is_file() for p in lab.parts), lab


@pytest.mark.parametrize("declaration, said", [
    ('title = "x"\n', "KeyError"),
    ('title = "x"\n[[parts]]\nid = "a"\nweight = 1\nuses = ["b"]\n', "unknown: ['b']"),
    ('title = "x"\n[[parts]]\nid = "a"\nweight = 1\n[[parts]]\nid = "a"\nweight = 2\n', "unique"),
    ('title = \n', "TOMLDecodeError"),
])
def test_a_bad_declaration_says_what_is_wrong(tmp_path, declaration, said):
    (tmp_path / "lab.toml").write_text(declaration)
    with pytest.raises(LabError, match=re.escape(said)):
        Lab.load(tmp_path)


def test_the_course_table_has_one_total_per_lab(tmp_path):
    from autograder.reports.records import course_csv
    from autograder.results import CheckResult, CohortRun, PartResult, SubmissionResult

    def record(student: str, points: float) -> SubmissionResult:
        return SubmissionResult("lab", student, {"p": PartResult("p", 100.0, [CheckResult("p", "c", points, True)])})

    runs = [CohortRun("one", [record("ann", 90), record("=bob", 40.5)], graded=2, skipped=0),
            CohortRun("two", [record("ann", 70)], graded=0, skipped=1)]
    rows = list(csv.reader(io.StringIO(course_csv(runs))))
    # A lab not handed in is a missing value, not a 0, and is named in the last column.
    assert rows == [["student", "one", "two", "total", "not handed in"], ["'=bob", "40.5", "", "40.5", "two"],
                    ["ann", "90", "70", "160", ""]]
