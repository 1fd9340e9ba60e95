"""Checks for part ``heads``: multi-head causal self-attention, as stacked heads and as split/merge."""

import ast

import torch

from autograder.checks import (expect_document, expect_equal, expect_student_error, expect_tensor, fail,
                               find_function, random_tensor)
from document_tensors import MHA_SEED123, WRAPPER_SEED123, YOUR_JOURNEY

INPUTS = torch.tensor(YOUR_JOURNEY)
BATCH = torch.stack((INPUTS, INPUTS))  # (2, 6, 3), as in 000 In [17] and 003

LINEAR = "torch.nn.modules.linear.Linear"
DROPOUT = "torch.nn.modules.dropout.Dropout"
MODULE_LIST = "torch.nn.modules.container.ModuleList"

# split_heads(arange(24).view(1, 3, 8), 2): head h holds features h*4 .. h*4+3 of every token.
EXPLICIT_TOKENS = torch.arange(24, dtype=torch.float32).view(1, 3, 8)
EXPLICIT_HEADS = torch.tensor([[
    [[0.0, 1.0, 2.0, 3.0], [8.0, 9.0, 10.0, 11.0], [16.0, 17.0, 18.0, 19.0]],     # head 0
    [[4.0, 5.0, 6.0, 7.0], [12.0, 13.0, 14.0, 15.0], [20.0, 21.0, 22.0, 23.0]],   # head 1
]])


def test_split_heads_on_explicit_tensor(student):
    """split_heads(arange(24).view(1, 3, 8), 2): head h holds features h*4 .. h*4+3 of every token."""
    expect_equal(student.heads.split_heads(EXPLICIT_TOKENS, 2), EXPLICIT_HEADS,
                 "split_heads(torch.arange(24.).view(1, 3, 8), num_heads=2)")


def test_merge_heads_on_explicit_tensor(student):
    """merge_heads undoes the split above: heads concatenated on the last dim, head 0 first."""
    expect_equal(student.heads.merge_heads(EXPLICIT_HEADS), EXPLICIT_TOKENS,
                 "merge_heads(x) with x of shape (1, 2, 3, 4) (the split of arange(24).view(1, 3, 8))")


def test_split_and_merge_shapes_match_document(student):
    """003 "A note on views": a (2, 3, 4) tensor split into 2 heads has shape (2, 2, 3, 2), and merges back."""
    x = random_tensor(3, 2, 3, 4)
    split = x.view(2, 3, 2, 2).transpose(1, 2)  # the trusted split
    result = expect_tensor(student.heads.split_heads(x, 2), "split_heads(x, 2) with x of shape (2, 3, 4)",
                           shape=(2, 2, 3, 2))
    expect_equal(result, split, "split_heads(x, 2) with x of shape (2, 3, 4)")
    expect_equal(student.heads.merge_heads(split), x, "merge_heads(x) with x of shape (2, 2, 3, 2)")


def test_split_heads_rejects_indivisible(student):
    """The docstring's contract: d_out must be divisible by num_heads."""
    expect_student_error(lambda: student.heads.split_heads(random_tensor(4, 1, 3, 5), 2), "ValueError",
                         "split_heads(x, 2) with d_out = 5")
    expect_student_error(lambda: student.heads.split_heads(random_tensor(5, 2, 4, 6), 4), "ValueError",
                         "split_heads(x, 4) with d_out = 6")


def test_wrapper_matches_document(student):
    """003 "Multi-head self-attention (naive)": MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2) after manual_seed(123)."""
    wrapper = student.seeded(123).heads.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)
    expect_document(wrapper(BATCH), WRAPPER_SEED123,
                    "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2) after manual_seed(123), on the 2 x 6 batch")


def test_wrapper_concatenates_heads_in_order(student):
    """003 "Multi-head self-attention (naive)" with a third head: heads are built in order after
    manual_seed(123), so the first two heads are the document's and the output grows to 3 * d_out."""
    wrapper = student.seeded(123).heads.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3)
    what = "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3) after manual_seed(123)"
    out = expect_tensor(wrapper(BATCH), what, shape=(2, 6, 6))
    expect_document(out[..., :4], WRAPPER_SEED123, f"{what}: the outputs of heads 0 and 1, out[..., :4]")


def _names_used(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def test_wrapper_structure(student):
    """Contract: ``heads`` is an nn.ModuleList of ``num_heads`` masking.CausalAttention modules."""
    wrapper = student.heads.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3)
    what = "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)"
    children = wrapper.structure()["children"]
    if children != [["heads", MODULE_LIST]]:
        fail(f"{what}: expected exactly one child, heads = nn.ModuleList([...]) ({[['heads', MODULE_LIST]]}), "
             f"got {children}")
    expected = [f"heads.{i}.{name}" for i in range(3) for name in ("W_query.weight", "W_key.weight", "W_value.weight", "mask")]
    found = list(wrapper.state_dict())
    if sorted(found) != sorted(expected):
        fail(f"{what}: expected the state_dict of three CausalAttention heads {expected}, got {found}")
    if "CausalAttention" not in _names_used(find_function(student.source("heads"), "MultiHeadAttentionWrapper", "heads")):
        fail("heads.MultiHeadAttentionWrapper must build its heads with masking.CausalAttention; "
             "the class never mentions CausalAttention")


def test_mha_matches_document(student):
    """000 In [18] (and 003 "Multi-head self-attention (parallel)"): MultiHeadAttention(3, 2, 6, 0.0, 2)
    after manual_seed(123)."""
    mha = student.seeded(123).heads.MultiHeadAttention(3, 2, 6, 0.0, 2)
    expect_document(mha(BATCH), MHA_SEED123,
                    "MultiHeadAttention(3, 2, 6, 0.0, num_heads=2) after manual_seed(123), on the 2 x 6 batch")


def test_mha_structure(student):
    """Contract: W_query, W_key, W_value, out_proj, dropout and the buffer ``mask``, created in that order."""
    mha = student.heads.MultiHeadAttention(3, 4, 5, 0.1, 2, qkv_bias=True)
    what = "MultiHeadAttention(3, 4, 5, 0.1, num_heads=2, qkv_bias=True)"
    info = mha.structure()
    expected_children = [["W_query", LINEAR], ["W_key", LINEAR], ["W_value", LINEAR], ["out_proj", LINEAR],
                         ["dropout", DROPOUT]]
    if info["children"] != expected_children:
        fail(f"{what}: expected the submodules {expected_children} in this order, got {info['children']}")
    expected_params = [[f"{name}.{kind}", [4, 3] if kind == "weight" else [4]]
                       for name in ("W_query", "W_key", "W_value") for kind in ("weight", "bias")]
    expected_params += [["out_proj.weight", [4, 4]], ["out_proj.bias", [4]]]
    if info["all_parameters"] != expected_params:
        fail(f"{what}: expected the parameters {expected_params}, got {info['all_parameters']}")
    if info["buffers"] != [["mask", "float32", [5, 5]]]:
        fail(f"{what}: expected one buffer, mask (float32, shape [5, 5]), got {info['buffers']}")
    expect_equal(mha.state_dict()["mask"], torch.triu(torch.ones(5, 5), diagonal=1),
                 f"{what}: buffer mask (1.0 strictly above the diagonal)")
    plain = student.heads.MultiHeadAttention(3, 4, 5, 0.1, 2).structure()["all_parameters"]
    expected_plain = [["W_query.weight", [4, 3]], ["W_key.weight", [4, 3]], ["W_value.weight", [4, 3]],
                      ["out_proj.weight", [4, 4]], ["out_proj.bias", [4]]]
    if plain != expected_plain:
        fail(f"MultiHeadAttention(3, 4, 5, 0.1, num_heads=2): expected the parameters {expected_plain} "
             f"(no query/key/value bias by default; out_proj always has one), got {plain}")


def test_mha_rejects_indivisible(student):
    """The docstring's contract: the constructor raises ValueError when d_out % num_heads != 0."""
    expect_student_error(lambda: student.heads.MultiHeadAttention(3, 5, 6, 0.0, 2), "ValueError",
                         "MultiHeadAttention(3, d_out=5, 6, 0.0, num_heads=2)")
    expect_student_error(lambda: student.heads.MultiHeadAttention(4, 6, 6, 0.0, 4), "ValueError",
                         "MultiHeadAttention(4, d_out=6, 6, 0.0, num_heads=4)")


