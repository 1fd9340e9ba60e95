"""Mistake: softmax always normalises over the last dim and ignores its `dim` argument."""
import torch


def normalize_sum(scores, dim=-1):
    return scores / scores.sum(dim=dim, keepdim=True)


def softmax(scores, dim=-1):
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def context_vector(inputs, weights):
    context = torch.zeros_like(inputs[0])
    for w_j, x_j in zip(weights, inputs):
        context = context + w_j * x_j
    return context


def context_vectors(inputs, weights):
    return weights @ inputs

