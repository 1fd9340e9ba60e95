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
    # Step 1: check that p is a probability (this comparison is also False for NaN).
    if not (p >= 0.0 and p <= 1.0):
        raise ValueError("the dropout probability p must be between 0 and 1, got " + str(p))
    # Step 2: in evaluation mode, or with nothing to drop, return the input as it is.
    if training is False or p == 0.0:
        return x
    # Step 3: dropping everything gives zeros (and avoids dividing by 1 - 1 = 0).
    if p == 1.0:
        return torch.zeros_like(x)
    keep_probability = 1.0 - p
    # Step 4: draw the random mask when none is given: uniform numbers in [0, 1),
    # an entry is kept when its number is at least p (probability 1 - p).
    if keep_mask is None:
        uniform_random_numbers = torch.empty_like(x).uniform_(0.0, 1.0, generator=generator)
        keep_mask = uniform_random_numbers >= p
    # Step 5: zero the dropped entries and scale up the kept ones by 1 / (1 - p).
    dropped_entries = torch.logical_not(keep_mask)
    return x.masked_fill(dropped_entries, 0.0) / keep_probability
