"""Checks for part ``attention``: attention weights with a mask, scaled dot-product attention and
multi-head attention, compared with PyTorch's own."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_children, expect_close, expect_gradient, expect_student_error, expect_tensor,
                                     expect_unmodified, expect_zero_at, fail, in_eval_mode, load_weights, random_tensor)
from trusted import (EMBEDDING_DIM, HEADS, SETUP, TOKENS, attention, future_positions, mha_state, torch_attention,
                     with_dropout)

LINEAR = "torch.nn.modules.linear.Linear"
DROPOUT = "torch.nn.modules.dropout.Dropout"
HEAD_DIM = EMBEDDING_DIM // HEADS
Q, K, V = (random_tensor(seed, TOKENS, HEAD_DIM) for seed in (31, 32, 33))  # one head of 001's set-up: (7, 16)
X = random_tensor(34, 1, TOKENS, EMBEDDING_DIM)
# The exercise is attention itself: while this part's calls run, PyTorch's fused attention raises, by the
# Python names (whatever alias reaches them; nn.MultiheadAttention calls them too) and as the fused kernels
# behind them (reached through torch.ops). Each lab's checks stand alone, so lab 1 declares its own list.
LIBRARY_ATTENTION = ("torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
                     "torch.nn.functional.multi_head_attention_forward",
                     "aten._scaled_dot_product_flash_attention_for_cpu",
                     "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
                     "aten._scaled_dot_product_cudnn_attention",
                     "aten._scaled_dot_product_fused_attention_overrideable", "aten._native_multi_head_attention")


@pytest.fixture(autouse=True)
def no_library_attention(student):
    with student.forbidding(*LIBRARY_ATTENTION):
        yield


def trusted_weights(query, key, mask=None):
    """softmax(query key^T / sqrt(d_k)) over the keys; ``mask`` True = hidden."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    return torch.softmax(scores if mask is None else scores.masked_fill(mask, -torch.inf), dim=-1)


def torch_mha_output(state, query, key, value, num_heads, mask=None, bias=True):
    with torch.no_grad():
        out, _ = torch_attention(state, query.shape[-1], num_heads, bias)(query, key, value, attn_mask=mask,
                                                                           need_weights=False)
    return out


def loaded(side, state, d_model=EMBEDDING_DIM, num_heads=HEADS, dropout=0.0, bias=True):
    mha = side.attention.MultiHeadAttention(d_model, num_heads, dropout, bias)
    load_weights(mha, state, f"MultiHeadAttention({d_model}, {num_heads}, dropout={dropout:g}, bias={bias})")
    return mha


def test_attention_weights_match_document_setup(student):
    """Document 001, In [246] for one head of 001's set-up (7 tokens, head size 16): softmax(q k^T / sqrt(d_k)) over the
    keys, scaled by the size of q and k (not the model width)."""
    expect_close(student.attention.attention_weights(Q, K), trusted_weights(Q, K),
                 "attention_weights(q, k) with q, k of shape (7, 16)", atol=1e-5, rtol=1e-4)


def test_attention_weights_hide_where_mask_is_true(student):
    """Document 001, In [246]: the causal masking, with lab 1's convention: True marks a hidden key, which gets weight exactly 0."""
    causal = future_positions(TOKENS)
    what = "attention_weights(q, k, mask) with mask = triu(ones(7, 7, dtype=bool), diagonal=1) (True = hidden)"
    weights = student.attention.attention_weights(Q, K, causal)
    expect_zero_at(weights, causal, what)
    expect_close(weights, trusted_weights(Q, K, causal), what, atol=1e-5, rtol=1e-4)


def test_attention_weights_mask_broadcasts(student):
    """Contract: a mask broadcastable to (..., T_q, T_k): one padding mask (B, 1, T_k) for every query, with
    T_q != T_k."""
    query, key = random_tensor(35, 2, 3, 4), random_tensor(36, 2, 5, 4)
    padding = torch.tensor([[[False, False, False, True, True]], [[False, False, False, False, True]]])
    what = "attention_weights(q, k, mask) with q (2, 3, 4), k (2, 5, 4) and a padding mask of shape (2, 1, 5)"
    weights = expect_tensor(student.attention.attention_weights(query, key, padding), what, shape=(2, 3, 5))
    expect_zero_at(weights, padding.expand(2, 3, 5), what)
    expect_close(weights, trusted_weights(query, key, padding), what, atol=1e-5, rtol=1e-4)


def test_attention_weights_a_fully_hidden_row_leaves_the_others(student):
    """Contract: a query whose keys are all hidden has no weights defined (the checks accept any value in its
    row: NaN from a softmax of -inf, as nn.MultiheadAttention gives); every other row is as usual."""
    hidden = future_positions(TOKENS)
    hidden[2] = True                                                  # query 2 may see no key
    what = "attention_weights(q, k, mask) with row 2 of the mask all True"
    weights = expect_tensor(student.attention.attention_weights(Q, K, hidden), what, shape=(TOKENS, TOKENS))
    others = torch.arange(TOKENS) != 2
    expect_close(weights[others], trusted_weights(Q, K, hidden)[others], f"{what}: the rows other than 2",
                 atol=1e-5, rtol=1e-4)


def test_attention_uses_no_library_attention(student):
    """Contract: attention is built from matrix products and a softmax; PyTorch's fused attention
    (F.scaled_dot_product_attention, nn.MultiheadAttention) raises while this part's checks run."""
    causal = future_positions(TOKENS)
    with student.forbidding():  # the library allowed: this check judges the ban, the others the values
        allowed = student.attention.scaled_dot_product_attention(Q, K, V, causal)
    expect_close(student.attention.scaled_dot_product_attention(Q, K, V, causal), allowed,
                 "scaled_dot_product_attention(q, k, v, causal mask) with PyTorch's fused attention unavailable, "
                 "against your own answer with it available", atol=1e-6,
                 equal_nan=True)


def test_attention_weights_keep_float64(student):
    """Contract: the dtype of query is kept: float64 stays float64."""
    query, key = Q.double(), K.double()
    what = "attention_weights(q, k) with float64 q, k of shape (7, 16)"
    weights = expect_tensor(student.attention.attention_weights(query, key), what, dtype=torch.float64)
    expect_close(weights, trusted_weights(query, key), what, atol=1e-10)


def test_sdpa_matches_torch(student):
    """Contract: scaled_dot_product_attention equals torch.nn.functional.scaled_dot_product_attention, whose
    boolean mask means the opposite (True = may attend), for T_q != T_k and d_v != d_k."""
    query, key, value = random_tensor(37, 2, 2, 3, 4), random_tensor(38, 2, 2, 5, 4), random_tensor(39, 2, 2, 5, 6)
    hidden = random_tensor(40, 3, 5) > 0.8
    hidden[:, 0] = False  # every query keeps a key
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=~hidden)
    expect_close(student.attention.scaled_dot_product_attention(query, key, value, hidden), expected,
                 "scaled_dot_product_attention(q, k, v, mask) with q (2, 2, 3, 4), k (2, 2, 5, 4), v (2, 2, 5, 6) and a "
                 "(3, 5) mask, True = hidden", atol=1e-5, rtol=1e-4)
    expect_close(student.attention.scaled_dot_product_attention(Q, K, V), F.scaled_dot_product_attention(Q, K, V),
                 "scaled_dot_product_attention(q, k, v) with q, k, v of shape (7, 16), no mask", atol=1e-5, rtol=1e-4)
    query, key, value = (random_tensor(41 + i, 1, 3, t, 5, dtype=torch.float64) for i, t in enumerate((2, 4, 4)))
    expect_close(student.attention.scaled_dot_product_attention(query, key, value),
                 F.scaled_dot_product_attention(query, key, value), "scaled_dot_product_attention(q, k, v) with float64 "
                 "q (1, 3, 2, 5), k and v (1, 3, 4, 5): other leading dims, the dtype kept", atol=1e-10, check_dtype=True)


def test_sdpa_leaves_inputs_untouched(student):
    """Contract: query, key, value and mask are not modified in place."""
    causal = future_positions(TOKENS)
    result, after = student.attention.scaled_dot_product_attention.with_args(Q.clone(), K.clone(), V.clone(), causal)
    expect_tensor(result, "scaled_dot_product_attention(q, k, v, mask)")
    for name, original, returned in zip(("query", "key", "value", "mask"), (Q, K, V, causal), after):
        expect_unmodified(original, returned, f"scaled_dot_product_attention ({name})")


def test_sdpa_gradients_flow(student):
    """Contract: gradients reach query, key and value."""
    upstream = random_tensor(41, TOKENS, HEAD_DIM)
    leaves = [t.clone().requires_grad_(True) for t in (Q, K, V)]
    backpropagate(trusted_weights(*leaves[:2], future_positions(TOKENS)) @ leaves[2], upstream)
    answer = student.attention.scaled_dot_product_attention.grad(Q, K, V, future_positions(TOKENS), upstream=upstream)
    for name, got, leaf in zip(("query", "key", "value"), answer["inputs"], leaves):
        expect_gradient(got, leaf.grad, f"gradient of scaled_dot_product_attention with respect to {name}")


def test_mha_structure(student):
    """Contract: W_query, W_key, W_value, out_proj (each nn.Linear(d_model, d_model, bias=bias)) and dropout."""
    for bias in (True, False):
        info = student.attention.MultiHeadAttention(8, 2, 0.1, bias).structure()
        what = f"MultiHeadAttention(8, 2, 0.1, bias={bias})"
        expected = [[name, LINEAR] for name in ("W_query", "W_key", "W_value", "out_proj")] + [["dropout", DROPOUT]]
        expect_children(info, expected, what, ordered=False)  # every check loads its weights by name
        params = [[f"{name}.{kind}", [8, 8] if kind == "weight" else [8]]
                  for name in ("W_query", "W_key", "W_value", "out_proj") for kind in ("weight", "bias")[:1 + bias]]
        if sorted(info["all_parameters"]) != sorted(params):
            fail(f"{what}: expected the parameters {params}, got {info['all_parameters']}")


def test_mha_rejects_indivisible(student):
    """Contract: ValueError when d_model is not divisible by num_heads."""
    expect_student_error(lambda: student.attention.MultiHeadAttention(32, 3), "ValueError",
                         "MultiHeadAttention(d_model=32, num_heads=3)")
    expect_student_error(lambda: student.attention.MultiHeadAttention(6, 4), "ValueError",
                         "MultiHeadAttention(d_model=6, num_heads=4)")


def test_mha_matches_torch_document_setup(student):
    """Document 001, In [247]: the multi-head self-attention in 001's set-up (2 heads on (1, 7, 32)), as
    nn.MultiheadAttention(32, 2, batch_first=True) with the same weights (its in_proj = W_query, W_key, W_value)."""
    state = mha_state(42, EMBEDDING_DIM)
    expect_close(loaded(student, state)(X, X, X), torch_mha_output(state, X, X, X, HEADS),
                 f"MultiHeadAttention(32, 2)(x, x, x) on x of shape (1, 7, 32) ({SETUP}), vs nn.MultiheadAttention",
                 atol=1e-5, rtol=1e-4)


def test_mha_causal_mask_matches_torch(student):
    """Contract: a (T, T) mask, True = hidden, applies to every sequence and head, as nn.MultiheadAttention's
    boolean attn_mask (T = 7 and T = 4)."""
    state = mha_state(43, EMBEDDING_DIM)
    for tokens in (TOKENS, 4):
        x = random_tensor(44, 2, tokens, EMBEDDING_DIM)
        causal = future_positions(tokens)
        expect_close(loaded(student, state)(x, x, x, causal), torch_mha_output(state, x, x, x, HEADS, causal),
                     f"MultiHeadAttention(32, 2)(x, x, x, causal mask) on x of shape (2, {tokens}, 32)", atol=1e-5,
                     rtol=1e-4)


def test_mha_cross_attention_matches_torch(student):
    """Contract: queries from one sequence, keys and values from another of another length (T_q = 5, T_k = 9),
    with 4 heads of size 8."""
    state = mha_state(45, EMBEDDING_DIM)
    query, memory = random_tensor(46, 2, 5, EMBEDDING_DIM), random_tensor(47, 2, 9, EMBEDDING_DIM)
    out = loaded(student, state, num_heads=4)(query, memory, memory)
    expect_close(out, torch_mha_output(state, query, memory, memory, 4),
                 "MultiHeadAttention(32, 4)(query, memory, memory) with query (2, 5, 32) and memory (2, 9, 32)",
                 atol=1e-5, rtol=1e-4)


def test_mha_without_bias_matches_torch(student):
    """Contract: bias=False removes the bias of all four projections, as nn.MultiheadAttention(bias=False)."""
    state = mha_state(48, EMBEDDING_DIM, bias=False)
    expect_close(loaded(student, state, bias=False)(X, X, X), torch_mha_output(state, X, X, X, HEADS, bias=False),
                 "MultiHeadAttention(32, 2, bias=False)(x, x, x) on x of shape (1, 7, 32)", atol=1e-5, rtol=1e-4)


def test_mha_gradients_reach_all_parameters(student):
    """Contract: gradients reach the three inputs and every weight."""
    state = mha_state(49, 8)
    query, key = random_tensor(50, 2, 3, 8), random_tensor(51, 2, 4, 8)
    upstream = random_tensor(52, 2, 3, 8)
    leaves = [t.clone().requires_grad_(True) for t in (query, key, key)]
    params = {k: v.clone().requires_grad_(True) for k, v in state.items()}
    backpropagate(attention(*leaves, params, 2), upstream)
    answer = loaded(student, state, 8, 2).grad(query, key, key, upstream=upstream)
    for name, got, leaf in zip(("query", "key", "value"), answer["inputs"], leaves):
        expect_gradient(got, leaf.grad, f"gradient of MultiHeadAttention(8, 2)'s output with respect to {name}")
    for name, param in params.items():
        expect_gradient(answer["parameters"].get(name), param.grad, f"gradient with respect to {name}")


def test_mha_dropout_only_in_training(student):
    """Contract: dropout acts on the attention weights (after the softmax), in training mode only."""
    state = mha_state(53, EMBEDDING_DIM)
    mha = loaded(student.seeded(54), state, dropout=0.5)
    what = "MultiHeadAttention(32, 2, dropout=0.5)(x, x, x)"
    mha.eval()
    first, again = mha(X, X, X), mha.using(student.seeded(55))(X, X, X)
    expect_close(first, attention(X, X, X, state, HEADS), in_eval_mode(what, first, again), atol=1e-5, rtol=1e-4)
    mha.train()
    expected = with_dropout(lambda drop: attention(X, X, X, state, HEADS, drop=drop), 0.5, seed=54)
    expect_close(mha(X, X, X), expected, f"{what} in training mode, called right after manual_seed(54): the attention "
                 "weights, after the softmax, through the module's nn.Dropout (its first random draw)",
                 atol=1e-5, rtol=1e-4)


### BEGIN HIDDEN TESTS
@given(seed=st.integers(0, 2**20), lead=st.lists(st.integers(1, 3), max_size=2), t_q=st.integers(1, 8),
       t_k=st.integers(1, 8), d_k=st.integers(1, 8), d_v=st.integers(1, 8), masked=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_sdpa_random_shapes_match_torch(student, seed, lead, t_q, t_k, d_k, d_v, masked, dtype):
    """Contract: scaled_dot_product_attention equals PyTorch's for other shapes, masks and dtypes."""
    query = random_tensor(seed, *lead, t_q, d_k, dtype=dtype)
    key, value = random_tensor(seed + 1, *lead, t_k, d_k, dtype=dtype), random_tensor(seed + 2, *lead, t_k, d_v, dtype=dtype)
    hidden = (random_tensor(seed + 3, t_q, t_k) > 0.5) if masked else None
    if hidden is not None:
        hidden[:, 0] = False
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=None if hidden is None else ~hidden)
    expect_close(student.attention.scaled_dot_product_attention(query, key, value, hidden), expected,
                 f"scaled_dot_product_attention on q {tuple(query.shape)}, v {tuple(value.shape)}, {dtype}, "
                 f"mask={masked}", atol=1e-5, rtol=1e-4)


@given(seed=st.integers(0, 2**20), batch=st.integers(1, 3), t_q=st.integers(1, 8), t_k=st.integers(1, 8),
       num_heads=st.integers(1, 4), head_dim=st.integers(1, 6), bias=st.booleans(), causal=st.booleans())
def test_mha_random_shapes_match_torch(student, seed, batch, t_q, t_k, num_heads, head_dim, bias, causal):
    """Contract: MultiHeadAttention equals nn.MultiheadAttention for other sizes, head counts and masks."""
    d = num_heads * head_dim
    t_k = t_q if causal else t_k
    state = mha_state(seed, d, bias)
    query, key = random_tensor(seed + 1, batch, t_q, d), random_tensor(seed + 2, batch, t_k, d)
    mask = future_positions(t_q) if causal else None
    expect_close(loaded(student, state, d, num_heads, bias=bias)(query, key, key, mask),
                 torch_mha_output(state, query, key, key, num_heads, mask, bias),
                 f"MultiHeadAttention({d}, {num_heads}, bias={bias}) on query {tuple(query.shape)}, key "
                 f"{tuple(key.shape)}, causal={causal}", atol=1e-5, rtol=1e-4)
### END HIDDEN TESTS
