"""Part ``dropout``: inverted dropout written by hand.

You randomly zero entries during training and rescale the survivors so that the
expected value of every entry is unchanged, leaving inference untouched.
"""
import torch


def dropout(x, p, keep_mask=None, generator=None, training=True):
    """Inverted dropout.

    Inputs:
    - x: floating-point tensor of any shape.
    - p: float, the probability of DROPPING (zeroing) each entry; must lie in
      [0, 1].
    - keep_mask: optional bool tensor with the shape of ``x``; ``True`` means
      the entry is KEPT. If given it decides which entries survive and no
      randomness is used; if None, each entry is kept independently with
      probability ``1 - p``.
    - generator: optional ``torch.Generator`` used to draw the random mask.
    - training: if False, dropout is the identity.

    Returns:
    - tensor with the shape and dtype of ``x``: kept entries are scaled by
      ``1 / (1 - p)``, dropped entries are 0. When ``training`` is False or
      ``p == 0`` the values of ``x`` are returned unchanged; when ``p == 1``
      the result is all zeros (no division by zero, no NaN).

    Raises:
    - ValueError if ``p`` is not within [0, 1].

    Gradients must flow back to ``x``, and ``x`` must not be modified in place.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p={p!r} outside [0, 1]")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x.new_zeros(x.shape)
    if keep_mask is None:
        keep_mask = torch.bernoulli(x.new_full(x.shape, 1.0 - p), generator=generator)
    return x * keep_mask.to(x.dtype) * (1.0 / (1.0 - p))
