"""Checks for part ``layernorm``: layer normalisation by hand, as a function and as a module."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_close, expect_equal, expect_gradient, expect_tensor, expect_unmodified,
                                     fail, load_weights, random_tensor)
from trusted import EMBEDDING_DIM, SETUP, TOKENS, layernorm_state

# The exercise is the formula: while this part's calls run, PyTorch's normalisations raise, by the
# names students call (for a message that names them) and as operators (whatever name reaches them:
# torch.ops.aten, a wrapper's __wrapped__, a batch norm of the transposed tokens).
LIBRARY_LAYER_NORM = ("torch.layer_norm", "torch.native_layer_norm", "torch.nn.functional.layer_norm",
                      "torch.nn.functional.group_norm", "torch.group_norm", "torch.nn.functional.rms_norm",
                      "torch.rms_norm", "torch.nn.functional.batch_norm", "torch.nn.functional.instance_norm",
                      "aten.native_layer_norm", "aten.native_group_norm", "aten.native_batch_norm",
                      "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_no_training")


@pytest.fixture(autouse=True)
def no_library_layer_norm(student):
    with student.forbidding(*LIBRARY_LAYER_NORM):
        yield


def trusted_layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


TOKEN_EMBEDDINGS = random_tensor(11, TOKENS, EMBEDDING_DIM, scale=2.0) + 0.5  # 001 In [11]'s shape, (7, 32)
WEIGHTS = layernorm_state(12, EMBEDDING_DIM)


def test_layer_norm_matches_torch(student):
    """Document 001, In [248] normalises 7 token embeddings of 32 features: layer_norm(x, weight, bias) on (7, 32)
    equals torch.nn.functional.layer_norm over the last dim."""
    out = student.layernorm.layer_norm(TOKEN_EMBEDDINGS, WEIGHTS["weight"], WEIGHTS["bias"])
    expect_close(out, trusted_layer_norm(TOKEN_EMBEDDINGS, WEIGHTS["weight"], WEIGHTS["bias"]),
                 f"layer_norm(x, weight, bias) on x of shape (7, 32) ({SETUP})", atol=1e-5, rtol=1e-4)


def test_layer_norm_normalises_each_token(student):
    """With weight 1 and bias 0, every token (row) has mean 0 and variance 1 over its features;
    the statistics are per token, never over the whole sequence (document 001 In [248] passes x.shape)."""
    ones, zeros = torch.ones(EMBEDDING_DIM), torch.zeros(EMBEDDING_DIM)
    what = "layer_norm(x, ones(32), zeros(32)) on x of shape (7, 32)"
    out = expect_tensor(student.layernorm.layer_norm(TOKEN_EMBEDDINGS, ones, zeros), what, shape=(TOKENS, EMBEDDING_DIM))
    expect_close(out.mean(dim=-1), torch.zeros(TOKENS), f"{what}: the mean of each token's features", atol=1e-5)
    expect_close(out.var(dim=-1, unbiased=False), torch.ones(TOKENS),
                 f"{what}: the (biased) variance of each token's features", atol=1e-3)


def test_layer_norm_biased_variance(student):
    """Contract: the variance divides by d_model (biased), as nn.LayerNorm: [1, 2, 3, 4] has mean 2.5 and
    variance 1.25, so it normalises to [-1.3416, -0.4472, 0.4472, 1.3416]."""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    expected = torch.tensor([[-1.3416, -0.4472, 0.4472, 1.3416]])
    expect_close(student.layernorm.layer_norm(x, torch.ones(4), torch.zeros(4), eps=0.0), expected,
                 "layer_norm([[1., 2., 3., 4.]], ones(4), zeros(4), eps=0.0)", atol=1e-4)


def test_layer_norm_eps_inside_the_square_root(student):
    """Contract: eps is added to the variance, inside the square root. It matters when a token's features
    are nearly equal (variance 1e-6, below eps = 1e-5)."""
    x = random_tensor(13, 3, 8, scale=1e-3)
    ones, zeros = torch.ones(8), torch.zeros(8)
    expect_close(student.layernorm.layer_norm(x, ones, zeros), trusted_layer_norm(x, ones, zeros),
                 "layer_norm(x, ones(8), zeros(8)) on nearly constant rows (variance about 1e-6, eps = 1e-5)",
                 atol=1e-4, rtol=1e-3)
    expect_close(student.layernorm.layer_norm(TOKEN_EMBEDDINGS, ones.repeat(4), zeros.repeat(4), eps=0.5),
                 trusted_layer_norm(TOKEN_EMBEDDINGS, ones.repeat(4), zeros.repeat(4), eps=0.5),
                 "layer_norm(x, ones(32), zeros(32), eps=0.5) on x of shape (7, 32)", atol=1e-5, rtol=1e-4)


def test_layer_norm_precise_far_from_zero(student):
    """Contract: float32 features far from 0 (mean 1000, standard deviation 1) normalise as precisely as
    nn.LayerNorm's: the variance is the mean of the squared deviations from the mean."""
    x = 1000.0 + random_tensor(14, 4, 16)
    ones, zeros = torch.ones(16), torch.zeros(16)
    expect_close(student.layernorm.layer_norm(x, ones, zeros), trusted_layer_norm(x, ones, zeros),
                 "layer_norm(x, ones(16), zeros(16)) on float32 x = 1000 + noise of standard deviation 1, shape "
                 "(4, 16)", atol=2e-3, rtol=1e-3)


def test_layer_norm_scales_then_shifts(student):
    """Contract: normalise first, then multiply by weight and add bias, per feature."""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 4.0, 0.0, 0.0]])
    weight, bias = torch.tensor([1.0, 2.0, -1.0, 0.5]), torch.tensor([0.0, 1.0, 10.0, -2.0])
    expect_close(student.layernorm.layer_norm(x, weight, bias, eps=0.0), trusted_layer_norm(x, weight, bias, eps=0.0),
                 "layer_norm(x, weight=[1, 2, -1, 0.5], bias=[0, 1, 10, -2], eps=0.0) on "
                 "[[1, 2, 3, 4], [4, 4, 0, 0]]", atol=1e-4)


def test_layer_norm_batched_and_float64(student):
    """Contract: any leading dims (..., d_model), and the dtype of x is kept: float64 stays float64."""
    weight, bias = layernorm_state(15, 6)["weight"].double(), layernorm_state(15, 6)["bias"].double()
    for shape in ((2, 3, TOKENS, 6), (4, 5, 6)):
        x = random_tensor(14, *shape, dtype=torch.float64)
        what = f"layer_norm(x, weight, bias) on x of shape {shape}, float64"
        out = expect_tensor(student.layernorm.layer_norm(x, weight, bias), what, shape=x.shape, dtype=torch.float64)
        expect_close(out, trusted_layer_norm(x, weight, bias), what, atol=1e-5, rtol=1e-4)


def test_layer_norm_leaves_input_untouched(student):
    """Contract: x is not modified in place."""
    result, (after, _, _) = student.layernorm.layer_norm.with_args(TOKEN_EMBEDDINGS.clone(), WEIGHTS["weight"],
                                                                   WEIGHTS["bias"])
    expect_tensor(result, "layer_norm(x, weight, bias)")
    expect_unmodified(TOKEN_EMBEDDINGS, after, "layer_norm(x, weight, bias)")


def test_layer_norm_gradients_flow(student):
    """Contract: gradients reach x, weight and bias (the graph is not cut)."""
    x = TOKEN_EMBEDDINGS[:3]
    upstream = random_tensor(16, 3, EMBEDDING_DIM)
    leaves = [t.clone().requires_grad_(True) for t in (x, WEIGHTS["weight"], WEIGHTS["bias"])]
    backpropagate(trusted_layer_norm(*leaves), upstream)
    answer = student.layernorm.layer_norm.grad(x, WEIGHTS["weight"], WEIGHTS["bias"], upstream=upstream)
    for name, got, leaf in zip(("x", "weight", "bias"), answer["inputs"], leaves):
        expect_gradient(got, leaf.grad, f"gradient of layer_norm's output with respect to {name}")


def test_layernorm_module_structure(student):
    """Contract: LayerNorm(d_model) has the parameters of nn.LayerNorm: weight (ones) and bias (zeros), (d_model,)."""
    norm = student.layernorm.LayerNorm(5)
    info = norm.structure()
    if info["all_parameters"] != [["weight", [5]], ["bias", [5]]]:
        fail(f"LayerNorm(5): expected the parameters [['weight', [5]], ['bias', [5]]] (nn.LayerNorm's names), "
             f"got {info['all_parameters']}")
    state = norm.state_dict()
    expect_equal(state["weight"], torch.ones(5), "LayerNorm(5).weight (initialised to ones)")
    expect_equal(state["bias"], torch.zeros(5), "LayerNorm(5).bias (initialised to zeros)")


def test_layernorm_module_matches_torch(student):
    """001's set-up: LayerNorm(32) with nn.LayerNorm's weights copied in equals nn.LayerNorm on (1, 7, 32),
    and LayerNorm(32, eps=0.5) uses its eps."""
    x = TOKEN_EMBEDDINGS.unsqueeze(0)
    for eps in (1e-5, 0.5):
        norm = student.layernorm.LayerNorm(EMBEDDING_DIM, eps=eps)
        load_weights(norm, WEIGHTS, f"LayerNorm(32, eps={eps:g})")
        expect_close(norm(x), trusted_layer_norm(x, WEIGHTS["weight"], WEIGHTS["bias"], eps),
                     f"LayerNorm(32, eps={eps:g}) with nn.LayerNorm's weights, on x of shape (1, 7, 32)",
                     atol=1e-5, rtol=1e-4)


### BEGIN HIDDEN TESTS
@given(seed=st.integers(0, 2**20), lead=st.lists(st.integers(1, 4), max_size=3), d=st.integers(2, 40),
       dtype=st.sampled_from([torch.float32, torch.float64]), scale=st.sampled_from([1e-3, 1.0, 50.0]))
def test_layer_norm_random_shapes(student, seed, lead, d, dtype, scale):
    """Contract: layer_norm equals torch.nn.functional.layer_norm for other shapes, dtypes and scales."""
    x = random_tensor(seed, *lead, d, dtype=dtype, scale=scale) + scale
    state = layernorm_state(seed + 1, d)
    weight, bias = state["weight"].to(dtype), state["bias"].to(dtype)
    expect_close(student.layernorm.layer_norm(x, weight, bias), trusted_layer_norm(x, weight, bias),
                 f"layer_norm on shape {tuple(x.shape)}, {dtype}", atol=1e-4, rtol=1e-3)


@given(seed=st.integers(0, 2**20), batch=st.integers(1, 3), tokens=st.integers(1, 9), d=st.integers(2, 40))
def test_layernorm_module_random_shapes(student, seed, batch, tokens, d):
    """Contract: the module equals nn.LayerNorm with the same weights for other sizes."""
    state = layernorm_state(seed, d)
    x = random_tensor(seed + 1, batch, tokens, d)
    norm = student.layernorm.LayerNorm(d)
    norm.load_state_dict(state)
    expect_close(norm(x), trusted_layer_norm(x, state["weight"], state["bias"]),
                 f"LayerNorm({d}) on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-4)
### END HIDDEN TESTS
