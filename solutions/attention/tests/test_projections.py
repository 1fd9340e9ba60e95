"""Checks for part ``projections``: trainable query/key/value projections and scaled dot-product attention."""

import math

import torch

from autograder.judge.checks import (backpropagate, expect_close, expect_document, expect_gradient, expect_tensor, expect_unmodified, fail,
                               load_weights, random_tensor)
from document_tensors import (
    IN9_SCORES, IN10_WEIGHTS, SEED123_QUERY2, SEED123_QUERY2_CONTEXT, SEED123_QUERY2_SCORES, SEED123_QUERY2_WEIGHTS,
    V1_SEED123, V2_AFTER_V1_SEED123, V2_AFTER_V1_WEIGHTS, V2_SEED789, WEI0_SEED42, YOUR_JOURNEY,
    seed42_head_setup, seed123_projection_matrices, seed123_v2_layers,
)

INPUTS = torch.tensor(YOUR_JOURNEY)
NAMES = ("W_query", "W_key", "W_value")
PARAMETER = "torch.nn.parameter.Parameter"
LINEAR = "torch.nn.modules.linear.Linear"


def unpack_qkv(result, what, shape):
    """project_qkv must return (queries, keys, values), each a tensor of ``shape``."""
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        kind = f"a {type(result).__name__} of length {len(result)}" if isinstance(result, (tuple, list)) \
            else type(result).__name__
        fail(f"{what}: expected a tuple (queries, keys, values), got {kind}")
    return [expect_tensor(t, f"{what}: {name}", shape=shape) for t, name in zip(result, ("queries", "keys", "values"))]


def attention(x, W_query, W_key, W_value, b_query=None, b_key=None, b_value=None):
    """Trusted self-attention: softmax(q k^T / sqrt(d_k)) v with q = x W_query (+ bias), and so on."""
    q, k, v = (x @ W if b is None else x @ W + b for W, b in ((W_query, b_query), (W_key, b_key), (W_value, b_value)))
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v


def expect_parameters(structure, expected, what):
    got = structure["all_parameters"]
    if got != expected:
        fail(f"{what}: expected the parameters (name, shape) {expected} in this creation order, got {got}")


# -- project_qkv -----------------------------------------------------------------------------------

def test_projected_query_matches_document(student):
    """Document 003, "Trainable self-attention", Projected query vector: x(2) @ W_q after manual_seed(123)."""
    W_q, W_k, W_v = seed123_projection_matrices()
    queries, _, _ = unpack_qkv(student.projections.project_qkv(INPUTS, W_q, W_k, W_v),
                               "project_qkv(inputs, W_q, W_k, W_v)", (6, 2))
    expect_document(queries[1], SEED123_QUERY2, "project_qkv(inputs, W_q, W_k, W_v) queries[1]")


def test_projected_query_scores_match_document(student):
    """Document 003, "Trainable self-attention", Unnormalized attention scores: query_2 @ keys.T of the projections."""
    W_q, W_k, W_v = seed123_projection_matrices()
    queries, keys, _ = unpack_qkv(student.projections.project_qkv(INPUTS, W_q, W_k, W_v),
                                  "project_qkv(inputs, W_q, W_k, W_v)", (6, 2))
    expect_document(queries[1] @ keys.T, SEED123_QUERY2_SCORES,
                    "queries[1] @ keys.T with (queries, keys, values) = project_qkv(inputs, W_q, W_k, W_v)")


def test_projected_batch_scores_match_document(student):
    """Document 002, In [13]/[14]: wei[0] = q @ k^T for nn.Linear(32, 16) query then key on x = randn(4, 8, 32), seed 42."""
    x, query, key = seed42_head_setup()
    W_query, W_key = query.weight.detach().T, key.weight.detach().T  # nn.Linear computes x @ weight.T
    W_value = random_tensor(5, 32, 16)  # the document projects no values here
    q, k, _ = unpack_qkv(student.projections.project_qkv(x, W_query, W_key, W_value),
                         "project_qkv(x, W_query, W_key, W_value) with x of shape (4, 8, 32)", (4, 8, 16))
    expect_document((q @ k.transpose(-2, -1))[0], WEI0_SEED42,
                    "(q @ k.transpose(-2, -1))[0] with (q, k, v) = project_qkv(x, ...)")


def test_project_qkv_projects_all_three(student):
    """Contract: queries, keys and values are x @ W_query, x @ W_key, x @ W_value, batched inputs included
    (one and two batch dims)."""
    W = [random_tensor(12 + i, 4, 3) for i in range(3)]
    for shape in ((2, 5, 4), (2, 1, 5, 4), (1, 3, 5, 4)):
        x = random_tensor(11, *shape)
        result = unpack_qkv(student.projections.project_qkv(x, *W), f"project_qkv on x of shape {shape}",
                            shape[:-1] + (3,))
        for got, W_i, output, name in zip(result, W, ("queries", "keys", "values"), NAMES):
            expect_close(got, x @ W_i, f"project_qkv {output} on x of shape {shape} (expected x @ {name})", atol=1e-5,
                         rtol=1e-5)


# -- scaled_attention_weights ------------------------------------------------------------------------

def test_scaled_weights_match_document(student):
    """Document 003, "Trainable self-attention", Attention weights: softmax(query_2 @ keys.T / sqrt(2))."""
    W_q, W_k, _ = seed123_projection_matrices()
    queries, keys = INPUTS @ W_q, INPUTS @ W_k
    weights = expect_tensor(student.projections.scaled_attention_weights(queries[1:2], keys),
                            "scaled_attention_weights(queries[1:2], keys)", shape=(1, 6))
    expect_document(weights[0], SEED123_QUERY2_WEIGHTS, "scaled_attention_weights(queries[1:2], keys)[0]")


def test_scaled_weights_from_printed_scores(student):
    """Document 000, In [10]: softmax(attn_scores_2 / sqrt(2)) of In [9]'s printed scores.

    The query [1, 0] against keys [s, 0] gives exactly the printed scores s with d_k = 2.
    """
    queries = torch.tensor([[1.0, 0.0]])
    keys = torch.tensor([[s, 0.0] for s in IN9_SCORES])
    weights = expect_tensor(student.projections.scaled_attention_weights(queries, keys),
                            "scaled_attention_weights(query, keys) for In [9]'s scores", shape=(1, 6))
    expect_document(weights[0], IN10_WEIGHTS, "scaled_attention_weights(query, keys)[0] for In [9]'s scores")


def test_scaled_weights_full_matrix_match_document(student):
    """Document 003, "Causal self-attention", Attention weights: all 6x6 weights from the projections of V2 (seed 123)."""
    W_query, W_key, _ = seed123_v2_layers()
    with torch.no_grad():
        queries, keys = W_query(INPUTS), W_key(INPUTS)
    expect_document(student.projections.scaled_attention_weights(queries, keys), V2_AFTER_V1_WEIGHTS,
                    "scaled_attention_weights(queries, keys)")


def test_scaled_weights_batched_contract(student):
    """Contract: (..., T_q, d_k) queries and (..., T_k, d_k) keys give (..., T_q, T_k) weights, rows summing to 1
    (one and two batch dims)."""
    for batch in ((2,), (3,), (2, 1), (1, 2)):
        queries, keys = random_tensor(21, *batch, 3, 4), random_tensor(22, *batch, 5, 4)
        weights = expect_tensor(student.projections.scaled_attention_weights(queries, keys),
                                f"scaled_attention_weights(queries {batch + (3, 4)}, keys {batch + (5, 4)})",
                                shape=batch + (3, 5), dtype=torch.float32)
        expect_close(weights.sum(dim=-1), torch.ones(*batch, 3), "row sums of scaled_attention_weights", atol=1e-5)


# -- SelfAttention_v1 / SelfAttention_v2 -------------------------------------------------------------

def test_v1_matches_document(student):
    """Document 003, "A self-attention class", Context vectors (V1): SelfAttention_v1(3, 2) built after manual_seed(123)."""
    v1 = student.seeded(123).projections.SelfAttention_v1(3, 2)  # built first, so V2 plays no part
    out = v1(INPUTS)
    expect_document(out, V1_SEED123, "SelfAttention_v1(3, 2) (seed 123) on inputs")
    expect_document(out[1], SEED123_QUERY2_CONTEXT, "SelfAttention_v1(3, 2) (seed 123) on inputs, row of x(2)")


def test_v2_after_v1_matches_document(student):
    """Document 003, "A self-attention class", Context vectors (V2): SelfAttention_v2(3, 2) built right after V1 (seed 123)."""
    _, v2 = student.build_in_order(123, ("projections.SelfAttention_v1", 3, 2), ("projections.SelfAttention_v2", 3, 2))
    expect_document(v2(INPUTS), V2_AFTER_V1_SEED123,
                    "SelfAttention_v2(3, 2) built after SelfAttention_v1(3, 2) (seed 123) on inputs")


def test_v2_seed789_matches_document(student):
    """Document 000, In [12]: SelfAttention_v2(3, 2) built after manual_seed(789), on the inputs."""
    v2 = student.seeded(789).projections.SelfAttention_v2(3, 2)
    expect_document(v2(INPUTS), V2_SEED789, "SelfAttention_v2(3, 2) (seed 789) on inputs")


def test_v2_with_v1_weights_matches_document(student):
    """Document 003, "A self-attention class", Context vectors (V1): V2 given V1's matrices (as nn.Linear weights, transposed)
    computes V1's context vectors, whatever order it creates its layers in."""
    W_q, W_k, W_v = seed123_projection_matrices()
    v2 = student.projections.SelfAttention_v2(3, 2)
    load_weights(v2, {f"{name}.weight": W.T.contiguous() for name, W in zip(NAMES, (W_q, W_k, W_v))},
                 "SelfAttention_v2(3, 2)")
    expect_document(v2(INPUTS), V1_SEED123, "SelfAttention_v2(3, 2) with V1's weights copied in, on inputs")


def test_v1_structure(student):
    """Contract: three nn.Parameter (d_in, d_out) matrices W_query, W_key, W_value, created in that order."""
    structure = student.projections.SelfAttention_v1(5, 4).structure()
    expected = [[name, [5, 4], PARAMETER] for name in NAMES]
    if structure["parameters"] != expected:
        fail(f"SelfAttention_v1(5, 4): expected the parameters (name, shape, type) {expected} in this creation "
             f"order, got {structure['parameters']}")
    expect_parameters(structure, [[name, [5, 4]] for name in NAMES], "SelfAttention_v1(5, 4)")


def test_v2_structure(student):
    """Contract: nn.Linear layers W_query, W_key, W_value (created in that order), bias only with qkv_bias=True."""
    for bias in (False, True):
        what = f"SelfAttention_v2(5, 4, qkv_bias={bias})"
        structure = student.projections.SelfAttention_v2(5, 4, qkv_bias=bias).structure()
        layers = [child for child in structure["children"] if child[0] in NAMES]
        expected = [[name, LINEAR] for name in NAMES]
        if layers != expected:
            fail(f"{what}: expected the layers (name, type) {expected} in this creation order, "
                 f"got {structure['children']}")
        expect_parameters(structure, [[f"{name}.{p}", shape] for name in NAMES
                                      for p, shape in (("weight", [4, 5]), ("bias", [4]))[:1 + bias]], what)


def test_v1_batched_forward(student):
    """Contract: forward on (B, T, d_in) gives (B, T, d_out), each sample equal to the unbatched output."""
    expect_batched_forward(student.projections.SelfAttention_v1(4, 3), "SelfAttention_v1(4, 3)")


def test_v2_batched_forward(student):
    """Contract: forward on (B, T, d_in) gives (B, T, d_out), each sample equal to the unbatched output."""
    expect_batched_forward(student.projections.SelfAttention_v2(4, 3, qkv_bias=True),
                           "SelfAttention_v2(4, 3, qkv_bias=True)")


def expect_batched_forward(module, what):
    x = random_tensor(31, 3, 5, 4, scale=2.0)
    batched = expect_tensor(module(x), f"{what} on a batch of shape (3, 5, 4)", shape=(3, 5, 3))
    for b in range(3):
        single = expect_tensor(module(x[b]), f"{what} on x[{b}] of shape (5, 4)", shape=(5, 3))
        expect_close(batched[b], single, f"{what}: sample {b} of the batched output vs the unbatched output",
                     atol=1e-5, rtol=1e-5)
    for shape in ((3, 1, 5, 4), (1, 3, 5, 4)):  # two batch dims
        stacked = expect_tensor(module(x.view(shape)), f"{what} on x of shape {shape} (two batch dims)",
                                shape=shape[:-1] + (3,))
        expect_close(stacked.reshape(3, 5, 3), batched, f"{what} on x of shape {shape} vs on (3, 5, 4)", atol=1e-5,
                     rtol=1e-5)


def test_functions_keep_float64(student):
    """Contract: the functions keep the input's dtype (float64 in, float64 out)."""
    x = random_tensor(41, 2, 5, 3, dtype=torch.float64)
    W = [random_tensor(42 + i, 3, 4, dtype=torch.float64) for i in range(3)]
    got = unpack_qkv(student.projections.project_qkv(x, *W), "project_qkv on float64 inputs", (2, 5, 4))
    for g, W_i, name in zip(got, W, ("queries", "keys", "values")):
        expect_tensor(g, f"project_qkv {name} on float64 inputs", dtype=torch.float64)
        expect_close(g, x @ W_i, f"project_qkv {name} on float64 inputs", atol=1e-12, rtol=1e-12)
    queries, keys = random_tensor(45, 2, 3, 4, dtype=torch.float64), random_tensor(46, 2, 5, 4, dtype=torch.float64)
    weights = expect_tensor(student.projections.scaled_attention_weights(queries, keys),
                            "scaled_attention_weights on float64 inputs", dtype=torch.float64)
    expected = torch.softmax(queries @ keys.transpose(-2, -1) / 2.0, dim=-1)
    expect_close(weights, expected, "scaled_attention_weights on float64 inputs", atol=1e-12, rtol=1e-12)


def test_gradients_reach_projections(student):
    """Contract: gradients reach the inputs and every projection weight."""
    x = random_tensor(51, 2, 4, 3)
    upstream = random_tensor(52, 2, 4, 5)
    W = [random_tensor(53 + i, 3, 5).requires_grad_(True) for i in range(3)]
    b = [random_tensor(56 + i, 5).requires_grad_(True) for i in range(3)]
    # V1 and V2 (with bias), against trusted autograd of the same formula
    backpropagate(attention(x, *W), upstream)
    v1 = student.projections.SelfAttention_v1(3, 5)
    load_weights(v1, {name: w.detach() for name, w in zip(NAMES, W)}, "SelfAttention_v1(3, 5)")
    grads = v1.grad(x, upstream=upstream)["parameters"]
    for name, w in zip(NAMES, W):
        expect_gradient(grads.get(name), w.grad, f"gradient of SelfAttention_v1 with respect to {name}")
    for t in W:
        t.grad = None
    backpropagate(attention(x, *W, *b), upstream)
    v2 = student.projections.SelfAttention_v2(3, 5, qkv_bias=True)
    state = {f"{name}.weight": w.detach().T.contiguous() for name, w in zip(NAMES, W)}
    state.update({f"{name}.bias": t.detach() for name, t in zip(NAMES, b)})
    load_weights(v2, state, "SelfAttention_v2(3, 5, qkv_bias=True)")
    grads = v2.grad(x, upstream=upstream)["parameters"]
    for name, w, t in zip(NAMES, W, b):
        what = "gradient of SelfAttention_v2 with respect to"
        expect_gradient(grads.get(f"{name}.weight"), w.grad.T, f"{what} {name}.weight")
        expect_gradient(grads.get(f"{name}.bias"), t.grad, f"{what} {name}.bias")
    # scaled_attention_weights, in float64
    queries = random_tensor(61, 3, 4, dtype=torch.float64).requires_grad_(True)
    keys = random_tensor(62, 5, 4, dtype=torch.float64).requires_grad_(True)
    up = random_tensor(63, 3, 5, dtype=torch.float64)
    backpropagate(torch.softmax(queries @ keys.T / 2.0, dim=-1), up)
    got = student.projections.scaled_attention_weights.grad(queries.detach(), keys.detach(), upstream=up)["inputs"]
    expect_gradient(got[0], queries.grad, "gradient of scaled_attention_weights with respect to queries",
                    atol=1e-9, rtol=1e-9)
    expect_gradient(got[1], keys.grad, "gradient of scaled_attention_weights with respect to keys",
                    atol=1e-9, rtol=1e-9)


def test_functions_leave_inputs_untouched(student):
    """Contract: no input tensor is modified in place."""
    x = random_tensor(71, 5, 3)
    W = [random_tensor(72 + i, 3, 2) for i in range(3)]
    _, after = student.projections.project_qkv.with_args(x.clone(), *(w.clone() for w in W))
    for original, back, name in zip((x, *W), after, ("x", *NAMES)):
        expect_unmodified(original, back, f"project_qkv (argument {name})")
    queries, keys = random_tensor(75, 4, 2), random_tensor(76, 5, 2)
    _, (after_q, after_k) = student.projections.scaled_attention_weights.with_args(queries.clone(), keys.clone())
    expect_unmodified(queries, after_q, "scaled_attention_weights (argument queries)")
    expect_unmodified(keys, after_k, "scaled_attention_weights (argument keys)")


### BEGIN HIDDEN TESTS
from hypothesis import given, strategies as st
import torch.nn.functional as F

dims = st.integers(1, 6)
batches = st.lists(st.integers(1, 3), max_size=2)


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 7), d_in=dims, d_out=dims, batch=batches)
def test_v1_random_weights(student, seed, tokens, d_in, d_out, batch):
    """Contract: SelfAttention_v1 gives the right output with other weights and shapes."""
    x = random_tensor(seed, *batch, tokens, d_in, scale=2.0)
    W = [random_tensor(seed + 1 + i, d_in, d_out) for i in range(3)]
    v1 = student.projections.SelfAttention_v1(d_in, d_out)
    load_weights(v1, dict(zip(NAMES, W)), f"SelfAttention_v1({d_in}, {d_out})")
    expect_close(v1(x), attention(x, *W), f"SelfAttention_v1({d_in}, {d_out}) with given weights on shape "
                 f"{tuple(x.shape)}", atol=1e-5, rtol=1e-4)


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 7), d_in=dims, d_out=dims, batch=batches, bias=st.booleans())
def test_v2_random_weights(student, seed, tokens, d_in, d_out, batch, bias):
    """Contract: SelfAttention_v2 gives the right output with other weights and shapes."""
    x = random_tensor(seed, *batch, tokens, d_in, scale=2.0)
    weights = [random_tensor(seed + 1 + i, d_out, d_in) for i in range(3)]
    biases = [random_tensor(seed + 4 + i, d_out) if bias else None for i in range(3)]
    state = {f"{name}.weight": w for name, w in zip(NAMES, weights)}
    if bias:
        state.update({f"{name}.bias": b for name, b in zip(NAMES, biases)})
    what = f"SelfAttention_v2({d_in}, {d_out}, qkv_bias={bias})"
    v2 = student.projections.SelfAttention_v2(d_in, d_out, qkv_bias=bias)
    load_weights(v2, state, what)
    expected = attention(x, *(w.T for w in weights), *biases)
    expect_close(v2(x), expected, f"{what} with given weights on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-4)


@given(seed=st.integers(0, 2**20), t_q=st.integers(1, 7), t_k=st.integers(1, 7), d_k=st.integers(1, 9), batch=batches)
def test_scaled_weights_random_shapes(student, reference, seed, t_q, t_k, d_k, batch):
    """Contract: scaled_attention_weights is right for other shapes, batched ones included."""
    queries = random_tensor(seed, *batch, t_q, d_k, scale=2.0)
    keys = random_tensor(seed + 1, *batch, t_k, d_k, scale=2.0)
    what = f"scaled_attention_weights(queries {tuple(queries.shape)}, keys {tuple(keys.shape)})"
    weights = student.projections.scaled_attention_weights(queries, keys)
    identity = torch.eye(t_k).expand(*batch, t_k, t_k)  # values = identity: the output is the weights
    expect_close(weights, F.scaled_dot_product_attention(queries, keys, identity), what, atol=1e-5, rtol=1e-4)
    expect_close(weights, reference.projections.scaled_attention_weights(queries, keys), what, atol=1e-5, rtol=1e-4)


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 7), d_in=dims, d_out=dims, batch=batches)
def test_project_qkv_random_shapes(student, reference, seed, tokens, d_in, d_out, batch):
    """Contract: project_qkv is right for other shapes."""
    x = random_tensor(seed, *batch, tokens, d_in)
    W = [random_tensor(seed + 1 + i, d_in, d_out) for i in range(3)]
    what = f"project_qkv on x of shape {tuple(x.shape)}, W of shape ({d_in}, {d_out})"
    got = unpack_qkv(student.projections.project_qkv(x, *W), what, (*batch, tokens, d_out))
    expected = reference.projections.project_qkv(x, *W)
    for g, e, name in zip(got, expected, ("queries", "keys", "values")):
        expect_close(g, e, f"{what}: {name}", atol=1e-5, rtol=1e-5)


@given(seed=st.integers(0, 2**20), d_in=dims, d_out=dims, bias=st.booleans())
def test_seeded_construction_matches_reference(student, reference, seed, d_in, d_out, bias):
    """Contract: after the same seed, construction creates the parameters in the documented order."""
    for target, args in (("SelfAttention_v1", (d_in, d_out)), ("SelfAttention_v2", (d_in, d_out, bias))):
        what = f"{target}{args} built after manual_seed({seed})"
        mine = getattr(student.seeded(seed).projections, target)(*args).state_dict()
        theirs = getattr(reference.seeded(seed).projections, target)(*args).state_dict()
        if sorted(mine) != sorted(theirs):
            fail(f"{what}: expected the state_dict keys {sorted(theirs)}, got {sorted(mine)}")
        for name, value in theirs.items():
            expect_close(mine[name], value, f"{what}: {name}", atol=0.0)


### END HIDDEN TESTS
