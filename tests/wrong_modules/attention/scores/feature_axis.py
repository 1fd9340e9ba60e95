"""Mistake: dot products over the wrong axis (features instead of tokens): a (d, d) matrix."""
import torch


def attention_scores_for_query(inputs, query):
    scores = torch.empty(inputs.shape[0])
    for i, x_i in enumerate(inputs):
        scores[i] = torch.dot(x_i, query)
    return scores


def attention_scores_loop(inputs):
    d = inputs.shape[1]
    scores = torch.empty(d, d)
    for i in range(d):
        for j in range(d):
            scores[i, j] = torch.dot(inputs[:, i], inputs[:, j])
    return scores


def attention_scores(inputs):
    return inputs.transpose(-2, -1) @ inputs
