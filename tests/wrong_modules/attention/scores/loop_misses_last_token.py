"""Mistake: the nested loop's query loop runs over range(T - 1): the last query's row is missing,
so the loop answers (T - 1, T) while the matrix product is right."""
import torch


def attention_scores_for_query(inputs, query):
    """Dot-product scores of one query against every token, using a loop.

    Inputs:
    - inputs: tensor of shape (T, d), one embedding per token.
    - query: tensor of shape (d,), same dtype as ``inputs``.

    Returns:
    - scores: tensor of shape (T,) with the dtype of ``inputs``, where
      ``scores[j] = inputs[j] . query``.

    Implementation notes: loop over the T tokens in Python and use
    ``torch.dot``, one call per token (a check counts them). Collect the per-token results and combine them into one
    tensor (e.g. a list plus ``torch.stack``) so that gradients still flow back
    to ``inputs`` and ``query``; do not write into a pre-allocated tensor
    in place.
    """
    # One scalar per key token; stacking keeps the autograd graph intact.
    scores = [torch.dot(x_j, query) for x_j in inputs]
    return torch.stack(scores)  # (T,)


def attention_scores_loop(inputs):
    """All pairwise dot-product scores, using two nested loops.

    Inputs:
    - inputs: tensor of shape (T, d).

    Returns:
    - scores: tensor of shape (T, T) with the dtype of ``inputs``, where
      ``scores[i, j] = inputs[i] . inputs[j]`` (row i = query i, column j =
      key j).

    Implementation notes: the outer loop runs over queries i, the inner loop
    over keys j, each entry computed with its own ``torch.dot`` call (a check
    counts them). Build the result in a
    gradient-friendly way (lists plus ``torch.stack``), not by in-place writes.
    """
    T = inputs.shape[0]
    rows = []
    for i in range(T - 1):
        rows.append(torch.stack([torch.dot(inputs[i], inputs[j]) for j in range(T)]))
    return torch.stack(rows)


def attention_scores(inputs):
    """All pairwise dot-product scores as one matrix product.

    Inputs:
    - inputs: tensor of shape (..., T, d); any number of leading batch dims
      (including none).

    Returns:
    - scores: tensor of shape (..., T, T), dtype of ``inputs``, equal to
      ``inputs @ inputs^T`` over the last two dims.

    Use ``transpose(-2, -1)`` (not ``.T``) so that batched inputs work.
    """
    return inputs @ inputs.transpose(-2, -1)  # (..., T, T)
