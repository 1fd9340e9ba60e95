"""Mistake: no max subtraction before exp, so large scores overflow to inf and give NaN weights."""
import torch


def normalize_sum(scores, dim=-1):
    return scores / scores.sum(dim=dim, keepdim=True)


def softmax(scores, dim=-1):
    exps = torch.exp(scores)
    return exps / exps.sum(dim=dim, keepdim=True)


def context_vector(inputs, weights):
    context = torch.zeros_like(inputs[0])
    for w_j, x_j in zip(weights, inputs):
        context = context + w_j * x_j
    return context


def context_vectors(inputs, weights):
    return weights @ inputs

