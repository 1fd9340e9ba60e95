"""Mistake: `.T` instead of transposing the last two dims, so batched inputs go wrong."""
import torch


def attention_scores_for_query(inputs, query):
    scores = []
    for x_i in inputs:
        scores.append(torch.dot(x_i, query))
    return torch.stack(scores)


def attention_scores_loop(inputs):
    rows = []
    for x_i in inputs:
        rows.append(torch.stack([torch.dot(x_i, x_j) for x_j in inputs]))
    return torch.stack(rows)


def attention_scores(inputs):
    return inputs @ inputs.T
