"""Checks for part ``feedforward``: the position-wise feed-forward block."""

import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_children, expect_close, expect_gradient, expect_tensor, fail, in_eval_mode,
                                     is_close, load_weights, random_tensor)
from trusted import D_FF, EMBEDDING_DIM, SETUP, TOKENS, feedforward, feedforward_state, with_dropout

LINEAR = "torch.nn.modules.linear.Linear"
DROPOUT = "torch.nn.modules.dropout.Dropout"
STATE = feedforward_state(21, EMBEDDING_DIM, D_FF)
X = random_tensor(22, 1, TOKENS, EMBEDDING_DIM)


def loaded(side, state=STATE, d_model=EMBEDDING_DIM, d_ff=D_FF, dropout=0.0):
    block = side.feedforward.FeedForward(d_model, d_ff, dropout)
    load_weights(block, state, f"FeedForward({d_model}, {d_ff}, dropout={dropout:g})")
    return block


def test_feedforward_structure(student):
    """Contract: linear1 (d_model -> d_ff), dropout, linear2 (d_ff -> d_model)."""
    info = student.feedforward.FeedForward(4, 6, 0.1).structure()
    expected = [["linear1", LINEAR], ["dropout", DROPOUT], ["linear2", LINEAR]]
    expect_children(info, expected, "FeedForward(4, 6, 0.1)", ordered=False)  # the order: its seeded check
    params = [["linear1.weight", [6, 4]], ["linear1.bias", [6]], ["linear2.weight", [4, 6]], ["linear2.bias", [4]]]
    if sorted(info["all_parameters"]) != sorted(params):
        fail(f"FeedForward(4, 6, 0.1): expected the parameters {params}, got {info['all_parameters']}")


def test_feedforward_created_in_order(student):
    """Contract: after manual_seed(7), FeedForward(32, 64) holds the weights of nn.Linear(32, 64) then
    nn.Linear(64, 32) built one after the other after the same seed."""
    block = student.seeded(7).feedforward.FeedForward(EMBEDDING_DIM, D_FF)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        first, second = torch.nn.Linear(EMBEDDING_DIM, D_FF), torch.nn.Linear(D_FF, EMBEDDING_DIM)
    state = block.state_dict()
    for name, layer in (("linear1", first), ("linear2", second)):
        for kind in ("weight", "bias"):
            expect_close(state.get(f"{name}.{kind}"), getattr(layer, kind).detach(),
                         f"FeedForward(32, 64) after manual_seed(7): {name}.{kind}", atol=0.0)


def test_feedforward_matches_document_setup(student):
    """Document 001, In [248]: the sizes (d_ff = 2 * EMBEDDING_DIM): linear2(relu(linear1(x))) on (1, 7, 32), with the
    judge's weights."""
    expect_close(loaded(student)(X), feedforward(X, STATE),
                 f"FeedForward(32, 64) on x of shape (1, 7, 32) ({SETUP})", atol=1e-5, rtol=1e-4)


def test_feedforward_acts_on_each_token_alone(student):
    """Contract: position-wise: changing token 3 changes output 3 and no other, and output 3 is what the block
    gives token 3 alone."""
    block = loaded(student)
    changed = X.clone()
    changed[:, 3] = random_tensor(23, 1, EMBEDDING_DIM)
    before, after = block(X), block(changed)
    keep = [t for t in range(TOKENS) if t != 3]
    expect_close(after[:, keep], before[:, keep], "FeedForward outputs of tokens other than 3 after changing token 3",
                 atol=1e-6)
    # Against the block's own answer, not the trusted one: this check is about locality, and a block
    # that computes every token wrongly but alike (another activation) is the other checks' to catch.
    if is_close(after[:, 3], before[:, 3], atol=1e-6):
        fail("FeedForward output of token 3 did not change when token 3 did")
    expect_close(after[:, 3:4], block(changed[:, 3:4]), "FeedForward output of the changed token 3, against "
                 "FeedForward given token 3 alone", atol=1e-6)


def test_feedforward_any_leading_dims(student):
    """Contract: (..., d_model): one token sequence (7, 32) as well as (2, 3, 7, 32) and (3, 1, 7, 32)."""
    block = loaded(student)
    for x in (X[0], random_tensor(24, 2, 3, TOKENS, EMBEDDING_DIM), random_tensor(27, 3, 1, TOKENS, EMBEDDING_DIM)):
        out = expect_tensor(block(x), f"FeedForward(32, 64) on shape {tuple(x.shape)}", shape=x.shape)
        expect_close(out, feedforward(x, STATE), f"FeedForward(32, 64) on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-4)


def test_feedforward_gradients_reach_all_parameters(student):
    """Contract: gradients reach the input and every weight."""
    upstream = random_tensor(25, *X.shape)
    leaf = X.clone().requires_grad_(True)
    params = {k: v.clone().requires_grad_(True) for k, v in STATE.items()}
    backpropagate(feedforward(leaf, params), upstream)
    answer = loaded(student).grad(X, upstream=upstream)
    expect_gradient(answer["inputs"][0], leaf.grad, "gradient of FeedForward's output with respect to its input")
    for name, param in params.items():
        expect_gradient(answer["parameters"].get(name), param.grad, f"gradient with respect to {name}")


def test_feedforward_dropout_only_in_training(student):
    """Contract: dropout acts between the ReLU and linear2, in training mode only (p is the drop probability)."""
    block = loaded(student.seeded(26), dropout=0.5)
    what = "FeedForward(32, 64, dropout=0.5)"
    block.eval()
    first, again = block(X), block.using(student.seeded(27))(X)
    expect_close(first, feedforward(X, STATE), in_eval_mode(what, first, again), atol=1e-5, rtol=1e-4)
    block.train()
    expected = with_dropout(lambda drop: feedforward(X, STATE, drop=drop), 0.5, seed=26)
    expect_close(block(X), expected, f"{what} in training mode, called right after manual_seed(26): the hidden "
                 "activations, after the ReLU, through the module's nn.Dropout (its first random draw)",
                 atol=1e-5, rtol=1e-4)


### BEGIN HIDDEN TESTS
@given(seed=st.integers(0, 2**20), lead=st.lists(st.integers(1, 4), min_size=1, max_size=3), d_model=st.integers(1, 24),
       d_ff=st.integers(1, 48))
def test_feedforward_random_sizes_match_torch(student, seed, lead, d_model, d_ff):
    """Contract: FeedForward equals linear2(relu(linear1(x))) for other sizes."""
    state = feedforward_state(seed, d_model, d_ff)
    x = random_tensor(seed + 1, *lead, d_model)
    expected = F.linear(F.relu(F.linear(x, state["linear1.weight"], state["linear1.bias"])),
                        state["linear2.weight"], state["linear2.bias"])
    expect_close(loaded(student, state, d_model, d_ff)(x), expected,
                 f"FeedForward({d_model}, {d_ff}) on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-4)
### END HIDDEN TESTS
