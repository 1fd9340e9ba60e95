"""Part ``scores``: raw dot-product attention scores.

You compute how strongly each token relates to the others, first with explicit
Python loops over tokens and then as a single matrix product.
"""
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
    ``torch.dot``. Collect the per-token results and combine them into one
    tensor (e.g. a list plus ``torch.stack``) so that gradients still flow back
    to ``inputs`` and ``query``; do not write into a pre-allocated tensor
    in place.
    """
    # Step 1: go through the tokens one at a time and compare each with the query.
    list_of_scores = []
    for token_embedding in inputs:
        # Step 2: the score of this token is its dot product with the query.
        score_for_this_token = torch.dot(token_embedding, query)
        list_of_scores.append(score_for_this_token)
    # Step 3: turn the list of 0-d tensors into one tensor of shape (T,).
    return torch.stack(list_of_scores)


def attention_scores_loop(inputs):
    """All pairwise dot-product scores, using two nested loops.

    Inputs:
    - inputs: tensor of shape (T, d).

    Returns:
    - scores: tensor of shape (T, T) with the dtype of ``inputs``, where
      ``scores[i, j] = inputs[i] . inputs[j]`` (row i = query i, column j =
      key j).

    Implementation notes: the outer loop runs over queries i, the inner loop
    over keys j, each entry computed with ``torch.dot``. Build the result in a
    gradient-friendly way (lists plus ``torch.stack``), not by in-place writes.
    """
    all_score_rows = []
    # Outer loop: the query token.
    for query_embedding in inputs:
        scores_for_this_query = []
        # Inner loop: every key token this query is compared with.
        for key_embedding in inputs:
            score_of_this_pair = torch.dot(query_embedding, key_embedding)
            scores_for_this_query.append(score_of_this_pair)
        # One row of the score matrix, shape (T,).
        row_of_scores = torch.stack(scores_for_this_query)
        all_score_rows.append(row_of_scores)
    # Stack the T rows into the (T, T) score matrix.
    score_matrix = torch.stack(all_score_rows)
    return score_matrix


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
    # Swap only the last two dimensions, so that batch dimensions stay where they are.
    inputs_transposed = torch.transpose(inputs, -2, -1)
    all_pairwise_scores = torch.matmul(inputs, inputs_transposed)
    return all_pairwise_scores
