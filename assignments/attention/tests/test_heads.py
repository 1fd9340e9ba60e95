"""Checks for part ``heads``: multi-head causal self-attention, as stacked heads and as split/merge."""

import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_close, expect_document, expect_equal, expect_gradient, expect_reused,
                                     expect_student_error, expect_tensor, expect_unmodified, expect_wired, fail,
                                     in_eval_mode, random_tensor)
from document_tensors import MHA_SEED123, WRAPPER_SEED123, YOUR_JOURNEY
from trusted import causal_weights, dropped_out

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
    """Document 003, "A note on views": a (2, 3, 4) tensor split into 2 heads has shape (2, 2, 3, 2), and merges back."""
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


def with_stand_ins(wrapper, num_heads: int):
    """The student's wrapper, each head answered by lab.toml's stand-in for masking wherever its own call
    raises or answers with the wrong shape or dtype: the wrapper is judged on its own wiring."""
    return wrapper.standing_in({f"heads.{i}": "masking" for i in range(num_heads)})


def test_wrapper_matches_document(student):
    """Document 003, "Multi-head self-attention (naive)": MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2) after manual_seed(123)."""
    wrapper = student.seeded(123).heads.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2)
    expect_document(wrapper(BATCH), WRAPPER_SEED123,
                    "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2) after manual_seed(123), on the 2 x 6 batch")


def test_wrapper_concatenates_its_own_heads_in_order(student):
    """Contract: the output is the wrapper's own heads' outputs concatenated on the last dim, head 0 first (3
    heads, so the output grows to 3 * d_out; then other sizes, with qkv_bias). Judged on the wrapper's own heads, called one by one: a mistake
    inside masking.CausalAttention costs masking's checks, not this one."""
    wrapper = with_stand_ins(student.heads.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3), 3)
    own = torch.cat([wrapper.submodule(f"heads.{i}")(BATCH) for i in range(3)], dim=-1)   # (2, 6, 3 * 2)
    expect_wired(wrapper(BATCH), own, "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3) on the 2 x 6 batch",
                 atol=1e-6)
    wrapper = with_stand_ins(student.heads.MultiHeadAttentionWrapper(4, 3, 5, 0.0, 2, qkv_bias=True), 2)
    x = random_tensor(9, 3, 5, 4)
    own = torch.cat([wrapper.submodule(f"heads.{i}")(x) for i in range(2)], dim=-1)       # (3, 5, 2 * 3)
    expect_wired(wrapper(x), own, "MultiHeadAttentionWrapper(4, 3, 5, 0.0, num_heads=2, qkv_bias=True) on x of shape "
                 "(3, 5, 4)", atol=1e-6)


def test_wrapper_structure(student):
    """Contract: ``heads`` is an nn.ModuleList of ``num_heads`` masking.CausalAttention modules."""
    wrapper = student.heads.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3)
    what = "MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)"
    info = wrapper.structure()
    children = info["children"]
    if children != [["heads", MODULE_LIST]]:
        fail(f"{what}: expected exactly one child, heads = nn.ModuleList([...]) ({[['heads', MODULE_LIST]]}), "
             f"got {children}")
    expected = [f"heads.{i}.{name}" for i in range(3) for name in ("W_query.weight", "W_key.weight", "W_value.weight", "mask")]
    found = list(wrapper.state_dict())
    if sorted(found) != sorted(expected):
        fail(f"{what}: expected the state_dict of three CausalAttention heads {expected}, got {found}")
    heads = [kind for name, kind in info["submodules"] if name.count(".") == 1]
    if heads != ["masking.CausalAttention"] * 3:
        fail(f"{what}: expected its heads to be masking.CausalAttention modules (the exercise reuses it), "
             f"got {heads}")
    for i in range(3):
        expect_reused(wrapper.submodule(f"heads.{i}"), student.masking.CausalAttention(3, 2, 6, 0.0), (BATCH,),
                      f"{what}.heads[{i}]")


def test_mha_matches_document(student):
    """Document 000, In [18] (and document 003 "Multi-head self-attention (parallel)"): MultiHeadAttention(3, 2, 6, 0.0, 2)
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


QKV = ("W_query", "W_key", "W_value")


def _mha_state(seed, d_in, d_out, context_length, qkv_bias):
    """A trusted state_dict for MultiHeadAttention, from a private generator."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape, scale):
        return torch.randn(shape, generator=gen) * scale

    state = {}
    for name in QKV:
        state[f"{name}.weight"] = randn(d_out, d_in, scale=d_in ** -0.5)
        if qkv_bias:
            state[f"{name}.bias"] = randn(d_out, scale=0.3)
    state["out_proj.weight"] = randn(d_out, d_out, scale=d_out ** -0.5)
    state["out_proj.bias"] = randn(d_out, scale=0.3)
    state["mask"] = torch.triu(torch.ones(context_length, context_length), diagonal=1)
    return state


def _linear(x, state, name):
    return F.linear(x, state[f"{name}.weight"], state.get(f"{name}.bias"))


def _trusted_mha(x, state, num_heads, dropout=lambda weights: weights):
    """Causal multi-head attention with the weights of ``state``; ``dropout`` acts on the attention weights."""
    B, T, _ = x.shape
    d_out = state["W_query.weight"].shape[0]
    q, k, v = (_linear(x, state, name).view(B, T, num_heads, d_out // num_heads).transpose(1, 2)
               for name in QKV)                                             # (B, H, T, head_dim)
    context = dropout(causal_weights(q, k)) @ v                             # (B, H, T, head_dim)
    return _linear(context.transpose(1, 2).reshape(B, T, d_out), state, "out_proj")


def _loaded_mha(side, state, d_in, d_out, context_length, dropout, num_heads, qkv_bias):
    mha = side.heads.MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
    mha.load_state_dict(state)
    return mha


@given(seed=st.integers(0, 2**20), position=st.integers(0, 5))
def test_mha_is_causal(student, seed, position):
    """Contract: no output position depends on a later input position."""
    state = _mha_state(seed, 4, 6, 6, False)
    mha = _loaded_mha(student, state, 4, 6, 6, 0.0, 3, False)
    x = random_tensor(seed + 1, 2, 6, 4)
    changed = x.clone()
    changed[:, position + 1:] = random_tensor(seed + 2, 2, 5 - position, 4)
    before = mha(x)
    expect_close(mha(changed)[:, :position + 1], before[:, :position + 1],
                 f"MultiHeadAttention outputs for tokens 0..{position} after changing only tokens "
                 f"{position + 1}.. (no output may depend on a later token)", atol=1e-6)


def test_mha_shorter_input_than_context(student):
    """Contract: inputs shorter than context_length use the top-left part of the mask."""
    state = _mha_state(11, 3, 4, 10, True)
    mha = _loaded_mha(student, state, 3, 4, 10, 0.0, 2, True)
    # All 10 tokens first: a module wrong at full length is wrong for another reason than the cut.
    for tokens, batch in ((10, 2), (1, 2), (4, 1), (9, 3)):
        x = random_tensor(tokens, batch, tokens, 3)
        cut = " (cut the mask to mask[:T, :T])" if tokens < 10 else ""
        expect_close(mha(x), _trusted_mha(x, state, 2),
                     f"MultiHeadAttention(3, 4, context_length=10, 0.0, num_heads=2) on {tokens} tokens{cut}",
                     atol=1e-5, rtol=1e-4)


@given(seed=st.integers(0, 2**20), batch=st.integers(1, 3), tokens=st.integers(1, 6), num_heads=st.integers(1, 4),
       head_dim=st.integers(1, 4), dtype=st.sampled_from([torch.float32, torch.float64, torch.int64]))
def test_split_merge_random_round_trip(student, seed, batch, tokens, num_heads, head_dim, dtype):
    """Contract: merge_heads(split_heads(x, H)) gives back x, for other shapes."""
    x = (random_tensor(seed, batch, tokens, num_heads * head_dim, dtype=torch.float64) * 10).to(dtype)
    split = x.view(batch, tokens, num_heads, head_dim).transpose(1, 2)  # trusted, non-contiguous
    result, (after, _) = student.heads.split_heads.with_args(x.clone(), num_heads)
    expect_equal(result, split, f"split_heads(x, {num_heads}) with x of shape {tuple(x.shape)} and dtype {dtype}")
    expect_unmodified(x, after, "split_heads")
    result, (after,) = student.heads.merge_heads.with_args(split)
    expect_equal(result, x, f"merge_heads(x) with x = (output of a transpose) of shape {tuple(split.shape)} "
                            f"and dtype {dtype}")
    expect_unmodified(split.contiguous(), after, "merge_heads")


def test_mha_gradients_reach_all_parameters(student):
    """Contract: gradients reach every parameter of MultiHeadAttention."""
    state = _mha_state(5, 3, 4, 6, True)
    mha = _loaded_mha(student, state, 3, 4, 6, 0.0, 2, True)
    x = random_tensor(6, 2, 5, 3)
    upstream = random_tensor(7, 2, 5, 4)
    params = {name: value.clone().requires_grad_(True) for name, value in state.items() if name != "mask"}
    x_leaf = x.clone().requires_grad_(True)
    backpropagate(_trusted_mha(x_leaf, {**params, "mask": state["mask"]}, 2), upstream)
    answer = mha.grad(x, upstream=upstream)
    expect_gradient(answer["inputs"][0], x_leaf.grad, "gradient of MultiHeadAttention's output with respect to its input")
    for name, param in params.items():
        if name not in answer["parameters"]:
            fail(f"expected a parameter {name} in MultiHeadAttention, found {sorted(answer['parameters'])}")
        expect_gradient(answer["parameters"][name], param.grad,
                        f"gradient of MultiHeadAttention's output with respect to {name}")


def test_mha_dropout_only_in_training(student):
    """Contract: dropout acts in training mode only, on the attention weights after the softmax; in eval mode
    the output is deterministic."""
    state = _mha_state(8, 3, 4, 6, False)
    x = random_tensor(9, 2, 6, 3)
    mha = _loaded_mha(student.seeded(10), state, 3, 4, 6, 0.5, 2, False)
    what = "MultiHeadAttention(3, 4, 6, dropout=0.5, num_heads=2)"
    mha.eval()
    first, again = mha(x), mha.using(student.seeded(11))(x)
    expect_close(first, _trusted_mha(x, state, 2), in_eval_mode(what, first, again), atol=1e-5, rtol=1e-4)
    expect_close(again, first, f"{what} in eval mode, called after another random seed", atol=0.0)
    mha.train()
    expect_close(mha(x), _trusted_mha(x, state, 2, dropout=lambda weights: dropped_out(weights, 0.5, seed=10)),
                 f"{what} in training mode, called right after manual_seed(10) (the attention weights, after the "
                 "softmax, through the module's nn.Dropout: its first random draw)", atol=1e-5, rtol=1e-4)


