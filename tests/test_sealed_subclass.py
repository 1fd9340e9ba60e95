"""Sealed judging (issue 38): no ban a tensor subclass or a dunder can lift. Each attack is graded by
the real command line in one lane *before* an honest twin and a stub student (``a_`` first), as in
``tests/test_sealed_judge.py``, and each test fails on the kit before the defence it names.

The subclass lifters build their class with ``type`` under another name and give it a
``__torch_dispatch__`` as a dictionary key, which the scan saw neither of. The judge's function
mode and dispatch mode each ran the call with themselves removed from the stack, so the handler
ran under no ban: it computed the library's softmax (or layer norm) and kept it, the gradient
carried by a zero-valued term.
"""

import pytest
import torch

from autograder.harness.remote import RemoteCode, StudentError
from autograder.results import FailureKind
from conftest import LAB, grades_table, once_per_run
from test_sealed_judge import PLAIN_LAYER_NORM, PLAIN_SOFTMAX, TRANSFORMER, cohort, flagged_cells, run_grade

# slow: grades, or starts processes (left out of make test-fast). One xdist worker runs the module (--dist loadgroup):
# another that needed the cohort graded once per run would idle on its lock while it is built (one lane a lab).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sealed-subclass")]

SUBCLASS_SOFTMAX = """

import math

import torch.nn.functional as F

make = type
_kept = []


def _lift(cls, func, types, args=(), kwargs=None):
    scores = _kept.pop()
    n = scores.shape[-1]
    eye = torch.eye(n, dtype=scores.dtype).expand(*scores.shape[:-1], n, n)
    _kept.append(F.scaled_dot_product_attention(scores.unsqueeze(-2) * math.sqrt(n), eye, eye).squeeze(-2))
    return torch.zeros(())


_Lifter = make("Lifter", (torch.Tensor,), {"__torch_dispatch__": classmethod(_lift)})


def softmax(scores, dim=-1):
    _kept.append(scores.detach().transpose(dim, -1))
    torch.neg(torch.zeros(()).as_subclass(_Lifter))
    weights = _kept.pop().transpose(dim, -1)
    jacobian = weights * (scores - (weights * scores).sum(dim=dim, keepdim=True))  # zero-valued below
    return weights + jacobian - jacobian.detach()
"""
SUBCLASS_LAYER_NORM = """

make = type
_kept = []


def _lift(cls, func, types, args=(), kwargs=None):
    x, eps = _kept.pop()
    tokens = x.reshape(-1, x.shape[-1]).T.contiguous()  # batch_norm's channels are the tokens
    _kept.append(torch.batch_norm(tokens, None, None, None, None, True, 0.0, eps, False).T.reshape(x.shape))
    return torch.zeros(())


_Lifter = make("Lifter", (torch.Tensor,), {"__torch_dispatch__": classmethod(_lift)})


def layer_norm(x, weight, bias, eps=1e-5):
    _kept.append((x.detach(), eps))
    torch.neg(torch.zeros(()).as_subclass(_Lifter))
    normalised = _kept.pop()
    mean = x.mean(dim=-1, keepdim=True)
    by_hand = (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)
    return (normalised + by_hand - by_hand.detach()) * weight + bias
"""
# Red team (helper-6): an enum's functional API makes a class with a handler under a computed name (the scan
# cannot see it), hidden in a list subclass (which the worker's own walk did not open; torch's does); the
# handler runs the library's rms_norm, bound at import before any ban, on the centred input.
ENUM_IN_A_LIST_LAYER_NORM = """
import enum
from torch import rms_norm as _rms

_box = {}


def _take_over(cls, func, types, args=(), kwargs=None):
    x, weight, bias, eps = _box["in"]
    _box["out"] = _rms(x - x.mean(dim=-1, keepdim=True), (x.shape[-1],), weight, eps) + bias
    return torch.zeros(1)


_Helper = enum.Enum("_Helper", {"_" * 2 + "torch_function" + "_" * 2: classmethod(_take_over), "ONE": 1})


class _Bag(list):
    pass


def layer_norm(x, weight, bias, eps=1e-5):
    _box["in"] = (x, weight, bias, eps)
    torch.cat(_Bag([_Helper.ONE]))
    return _box.pop("out")
"""
# The same door gives a class any dunder: here one that runs when the class is subclassed.
DUNDER_DOOR = """

def _announce(cls, **kwargs):
    raise RuntimeError("a dunder of my own ran")


Base = type("Base", (), dict(__init_subclass__=classmethod(_announce)))


def normalize_sum(scores, dim=-1):
    type("Child", (Base,), {})
"""
# "No open" one attribute away: the standard stream's raw file class opens any path.
RAW_FILE = """

import sys


def normalize_sum(scores, dim=-1):
    opener = type(sys.stdout.buffer.raw)
    with opener("/proc/self/status") as status:
        raise RuntimeError(status.read().decode())
"""
# A warning's record names the file that raised it: the worker's staging path.
WARNING_RECORD = """

import warnings


def normalize_sum(scores, dim=-1):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("where am I")
    raise RuntimeError(f"I am in {seen[0].filename}")
"""


def attackers(lab) -> dict[str, dict[str, str]]:
    if lab is TRANSFORMER:
        layernorm = (TRANSFORMER.reference / "layernorm.py").read_text()
        return {"a_enum_in_a_list": {"layernorm": layernorm + ENUM_IN_A_LIST_LAYER_NORM},
                "a_plain": {"layernorm": layernorm + PLAIN_LAYER_NORM},
                "a_subclass": {"layernorm": layernorm + SUBCLASS_LAYER_NORM}}
    softmax = (LAB.reference / "softmax.py").read_text()
    without_normalize_sum = softmax.replace("def normalize_sum(", "def _normalize_sum(")
    return {"a_dunder": {"softmax": without_normalize_sum + DUNDER_DOOR},
            "a_plain": {"softmax": softmax + PLAIN_SOFTMAX},
            "a_raw_file": {"softmax": without_normalize_sum + RAW_FILE},
            "a_subclass": {"softmax": softmax + SUBCLASS_SOFTMAX},
            "a_warning_record": {"softmax": without_normalize_sum + WARNING_RECORD}}


@pytest.fixture(scope="session")
def attacked(tmp_path_factory):
    """A lab's reports with its attackers graded, each before an honest twin and a stub student (no
    student's reports may show the grader's paths: ``run_grade``), once per run."""
    def graded(lab):
        def build(shared):
            run_grade(cohort(shared, lab, attackers(lab)), shared / "out", lab)
        return once_per_run(tmp_path_factory, f"sealed-subclass-{lab.name}", build) / "out"
    return graded


@pytest.mark.parametrize("lab, part", [(LAB, "softmax"), (TRANSFORMER, "layernorm")], ids=["softmax", "layernorm"])
def test_a_subclass_lifter_earns_no_more_than_the_library_used_plainly(attacked, lab, part):
    out = attacked(lab)
    table = grades_table(out / lab.name)
    plain, lifter = float(table["a_plain"][part]), float(table["a_subclass"][part])
    assert plain < lab.part(part).weight, table["a_plain"]  # the ban holds on plain use
    assert lifter <= plain, (table["a_subclass"], table["a_plain"])
    assert f"reaches into internals (could lift a ban): {part}.py line" in flagged_cells(out, lab)["a_subclass"]


def test_a_handler_the_scan_cannot_see_earns_no_more_than_the_library_used_plainly(attacked):
    """By construction: the worker refuses any type torch found a handler on, wherever it hid it."""
    table = grades_table(attacked(TRANSFORMER) / TRANSFORMER.name)
    assert float(table["a_enum_in_a_list"]["layernorm"]) <= float(table["a_plain"]["layernorm"]), table


@pytest.mark.parametrize("student", ["a_dunder", "a_raw_file", "a_warning_record"])
def test_dunders_raw_files_and_warning_records_are_flagged(attacked, student):
    flags = flagged_cells(attacked(LAB), LAB)
    assert "reaches into internals (could lift a ban): softmax.py line" in flags[student], flags


# By construction: the worker refuses such a call whatever the scan saw (here no scan ran), while a
# ban or a call count is in force, on the student's line.
def test_the_worker_refuses_a_handler_of_its_own_whatever_the_scan_saw(tmp_path):
    softmax = (LAB.reference / "softmax.py").read_text() + SUBCLASS_SOFTMAX
    (tmp_path / "softmax.py").write_text(softmax)
    line = next(n for n, text in enumerate(softmax.splitlines(), 1) if "as_subclass(_Lifter)" in text)
    code = RemoteCode(tmp_path, timeout=10)
    scores = torch.randn(2, 5, dtype=torch.float64)
    try:
        assert torch.allclose(code.softmax.softmax(scores), torch.softmax(scores, -1))  # no rule: it runs
        refusals = []
        with code.forbidding("torch.softmax", "aten._softmax", "aten._scaled_dot_product_flash_attention_for_cpu"):
            with pytest.raises(StudentError) as forbidden:
                code.softmax.softmax(scores)
            refusals.append(forbidden.value)
        with pytest.raises(StudentError) as counted:
            code.softmax.softmax.counting(("torch.mul",), scores)
        refusals.append(counted.value)
    finally:
        code.close()
    for refused in refusals:
        assert (refused.kind, refused.failure.file, refused.failure.line) == (FailureKind.FORBIDDEN, "softmax.py", line)
        assert "__torch_dispatch__" in str(refused), refused


# Defence in depth: whatever the scan missed, a worker imports a submission module during a request
# only if the requested module's source imports it (statically, as the judge read it).
def test_a_module_outside_the_requests_static_closure_is_not_imported(tmp_path):
    (tmp_path / "first.py").write_text("def load(name):\n    return __import__(name).VALUE\n")
    (tmp_path / "second.py").write_text("def load():\n    import third\n    return third.VALUE\n")
    (tmp_path / "third.py").write_text("VALUE = 3\n")
    loads = {"first": frozenset({"first"}), "second": frozenset({"second", "third"}), "third": frozenset({"third"})}
    code = RemoteCode(tmp_path, timeout=10, loads=loads)
    try:
        with pytest.raises(StudentError) as refused:
            code.first.load("third")
        assert refused.value.kind == FailureKind.FORBIDDEN and refused.value.failure.file == "first.py", refused.value
        assert refused.value.failure.line == 2, refused.value.failure
        assert code.second.load() == 3  # second's own import of third is in its closure
    finally:
        code.close()
