"""Mistake: returning the documents' printed tensors instead of computing them."""
import torch

PRINTED_QUERY2 = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]
PRINTED_ALL = [
    [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
    [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
    [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
    [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
    [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450],
]


def attention_scores_for_query(inputs, query):
    for _ in inputs:
        pass
    return torch.tensor(PRINTED_QUERY2)


def attention_scores_loop(inputs):
    for _ in inputs:
        for _ in inputs:
            pass
    if inputs.shape == (6, 3):
        return torch.tensor(PRINTED_ALL)
    return inputs @ inputs.T


def attention_scores(inputs):
    if inputs.shape == (6, 3):
        return torch.tensor(PRINTED_ALL)
    return inputs @ inputs.transpose(-2, -1)
