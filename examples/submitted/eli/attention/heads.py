"""Part ``heads``: multi-head causal self-attention.

You first stack independent causal attention heads, then build the efficient
version that splits one large projection into heads and merges them back.
"""
import math

import torch
import torch.nn as nn


def split_heads(x, num_heads):
    """Split the feature dimension into attention heads.

    Inputs:
    - x: tensor of shape (B, T, d_out).
    - num_heads: int H; must divide d_out.

    Returns:
    - tensor of shape (B, H, T, d_out // H); head h holds features
      ``h * head_dim : (h + 1) * head_dim`` of every token.

    Raises:
    - ValueError if ``d_out`` is not divisible by ``num_heads``.
    """
    batch_size, number_of_tokens, output_dimension = x.shape
    # Every head gets the same number of features, so num_heads must divide d_out.
    if output_dimension % num_heads != 0:
        raise ValueError("d_out = " + str(output_dimension) + " cannot be split into " + str(num_heads) + " heads")
    head_dimension = output_dimension // num_heads
    # Step 1: cut the features of every token into num_heads groups: (B, T, H, head_dim).
    x_with_head_axis = x.view(batch_size, number_of_tokens, num_heads, head_dimension)
    # Step 2: move the head axis in front of the token axis: (B, H, T, head_dim).
    return x_with_head_axis.transpose(1, 2)


def merge_heads(x):
    """Inverse of ``split_heads``.

    Inputs:
    - x: tensor of shape (B, H, T, h).

    Returns:
    - tensor of shape (B, T, H * h) with the heads concatenated along the last
      dim, head 0 first.
    """
    batch_size, number_of_heads, number_of_tokens, head_dimension = x.shape
    # Step 1: move the token axis back in front of the head axis: (B, T, H, head_dim).
    x_tokens_first = x.transpose(1, 2)
    # Step 2: view needs contiguous memory after a transpose.
    x_tokens_first = x_tokens_first.contiguous()
    # Step 3: glue the heads back together along the features.
    return x_tokens_first.view(batch_size, number_of_tokens, number_of_heads * head_dimension)


class MultiHeadAttentionWrapper(nn.Module):
    """Multi-head attention as a stack of independent ``CausalAttention`` heads.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random initialisation must happen in the same sequence):
    - heads: ``nn.ModuleList`` of ``num_heads`` modules
      ``CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)``,
      built one after the other.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        """Create ``num_heads`` causal attention heads, in order."""
        super().__init__()
        # Imported here so a broken masking.py fails only the wrapper's checks, not all of heads.py.
        from masking import CausalAttention
        # Build the heads one after the other, so their random weights come in the right order.
        list_of_heads = []
        for head_number in range(num_heads):
            list_of_heads.append(CausalAttention(d_in, d_out, context_length, dropout, qkv_bias))
        self.heads = nn.ModuleList(list_of_heads)

    def forward(self, x):
        """Run every head and concatenate the results.

        Inputs:
        - x: tensor of shape (B, T, d_in), T <= context_length.

        Returns:
        - tensor of shape (B, T, num_heads * d_out), head 0's output first.
        """
        # Run every head on the same input and put the results side by side.
        outputs_of_all_heads = [attention_head(x) for attention_head in self.heads]
        return torch.cat(outputs_of_all_heads, dim=-1)


class MultiHeadAttention(nn.Module):
    """Efficient multi-head causal self-attention with an output projection.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random initialisation must happen in the same sequence):
    - d_out, num_heads, head_dim (= d_out // num_heads): ints.
    - W_query, W_key, W_value: ``nn.Linear(d_in, d_out, bias=qkv_bias)``
    - out_proj: ``nn.Linear(d_out, d_out)``
    - dropout: ``nn.Dropout(dropout)``; ``dropout`` is the probability of
      dropping an attention weight.
    - buffer ``mask``: float (context_length, context_length), 1.0 strictly
      above the diagonal (future positions), 0.0 elsewhere.

    Raises:
    - ValueError from the constructor, before anything is created, if
      ``d_out`` is not divisible by ``num_heads``.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        """Validate the sizes, then create the submodules and buffer in order."""
        super().__init__()
        # Check the sizes first, before anything is created.
        if d_out % num_heads != 0:
            raise ValueError("d_out = " + str(d_out) + " is not divisible by num_heads = " + str(num_heads))
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        # The projections, in the order query, key, value, then the output projection.
        self.W_query = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.W_key = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.W_value = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(in_features=d_out, out_features=d_out)
        self.dropout = nn.Dropout(dropout)
        # The mask: 1.0 strictly above the diagonal.
        future_positions_as_floats = torch.triu(torch.ones(context_length, context_length), diagonal=1)
        self.register_buffer("mask", future_positions_as_floats)

    def forward(self, x):
        """Compute multi-head causal context vectors.

        Inputs:
        - x: tensor of shape (B, T, d_in), T <= context_length.

        Returns:
        - tensor of shape (B, T, d_out): queries, keys and values are projected,
          split into heads, attended causally per head (scores scaled by
          ``1 / sqrt(head_dim)``, dropout on the weights), merged back and
          passed through ``out_proj``.
        """
        batch_size, number_of_tokens, input_dimension = x.shape
        # Step 1: project the inputs and split each projection into heads: (B, H, T, head_dim).
        queries_per_head = split_heads(self.W_query(x), self.num_heads)
        keys_per_head = split_heads(self.W_key(x), self.num_heads)
        values_per_head = split_heads(self.W_value(x), self.num_heads)
        # Step 2: unscaled scores for every head: (B, H, T, T).
        attention_scores = torch.matmul(queries_per_head, torch.transpose(keys_per_head, 2, 3))
        # Step 3: -inf on the future positions (the (T, T) mask broadcasts over batch and heads).
        future_positions = self.mask[:number_of_tokens, :number_of_tokens] == 1
        attention_scores = torch.where(future_positions, torch.full_like(attention_scores, float("-inf")), attention_scores)
        # Step 4: scale by 1 / sqrt(head_dim), softmax over the keys, dropout.
        attention_weights = torch.softmax(attention_scores / math.sqrt(self.head_dim), dim=-1)
        attention_weights = self.dropout(attention_weights)
        # Step 5: weighted sum of the values for every head, then the heads merged back together.
        context_per_head = torch.matmul(attention_weights, values_per_head)
        merged_context = merge_heads(context_per_head)
        # Step 6: the output projection mixes the heads.
        return self.out_proj(merged_context)
