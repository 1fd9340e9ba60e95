"""Mistake: the loop exercises answered with matrix products (right numbers, wrong form)."""


def attention_scores_for_query(inputs, query):
    return inputs @ query


def attention_scores_loop(inputs):
    return inputs @ inputs.T


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)
