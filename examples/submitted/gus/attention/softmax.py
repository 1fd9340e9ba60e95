"""Part ``softmax``: turning scores into attention weights and context vectors.

You write a naive sum-normalisation and a numerically stable softmax by hand,
then use the resulting weights to mix token embeddings into context vectors.
"""
import torch


def normalize_sum(scores, dim=-1):
    """Naive normalisation: divide the scores by their sum along ``dim``.

    Inputs:
    - scores: floating-point tensor of any shape.
    - dim: dimension to normalise over (negative values allowed).

    Returns:
    - tensor with the shape and dtype of ``scores`` whose entries sum to 1
      along ``dim``. No exponentials are involved, so negative scores give
      negative "weights"; that weakness motivates the softmax below.

    The input must not be modified in place.
    """
    totals = scores.sum(dim=dim, keepdim=True)
    return scores / totals


def softmax(scores, dim=-1):
    """Numerically stable softmax along ``dim``, written from scratch.

    Inputs:
    - scores: floating-point tensor of any shape (float32 or float64). Entries
      may be ``-inf`` (e.g. masked positions).
    - dim: dimension to normalise over (negative values allowed).

    Returns:
    - weights: tensor with the shape and dtype of ``scores``; along ``dim`` the
      entries are non-negative and sum to 1. Entries equal to ``-inf`` get a
      weight of exactly 0. Large finite scores such as [1000., 1001., 1002.]
      must give finite results (no overflow, no NaN).

    Implementation notes: subtract the maximum along ``dim`` (with
    ``keepdim=True``) before exponentiating. You must not call any softmax
    (or log-softmax) provided by PyTorch; build it from ``exp`` and ``sum``.
    The input must not be modified in place.
    """
    m = scores.max(dim=dim, keepdim=True)[0]
    top = torch.exp(scores - m)
    bottom = top.sum(dim=dim, keepdim=True)
    return top / bottom


def context_vector(inputs, weights):
    """Weighted sum of token embeddings for one query, using a loop.

    Inputs:
    - inputs: tensor of shape (T, d).
    - weights: tensor of shape (T,), the attention weights of a single query.

    Returns:
    - context: tensor of shape (d,), dtype of ``inputs``, equal to
      ``sum_j weights[j] * inputs[j]``.

    Implementation notes: accumulate with a Python loop over the T tokens,
    out of place (``acc = acc + ...``) so gradients flow to both arguments.
    """
    total = None
    for j in range(len(inputs)):
        term = weights[j] * inputs[j]
        if total is None:
            total = term
        else:
            total = total + term
    return total


def context_vectors(inputs, weights):
    """Context vectors for all queries at once, as a matrix product.

    Inputs:
    - inputs: tensor of shape (..., T, d).
    - weights: tensor of shape (..., T, T); row i holds the weights of query i
      over the T tokens.

    Returns:
    - contexts: tensor of shape (..., T, d), equal to ``weights @ inputs``.
    """
    return weights.matmul(inputs)
