"""Trusted weights and computations the checks compare with; no student code runs here (a wiring
check's calls into the student's own sub-layers go to the worker).

Document 001 builds its layers from unseeded ``torch.rand`` weights and embeddings, so none of
its printed values reproduces (../shared/notes/documents.md); what it fixes is the set-up: 7
tokens, 32-dim embeddings (In [11]), 2 heads and ``d_ff = 2 * EMBEDDING_DIM`` (In [248]). The
references are PyTorch's own layers, given the same weights as the student's (copied in by the
judge, never by creation order), and, where dropout draws random numbers, the judge's own
forward pass replaying the same draws.
"""

from types import SimpleNamespace

import torch
import torch.nn.functional as F

import stand_ins

TOKENS, EMBEDDING_DIM, HEADS, D_FF = 7, 32, 2, 64  # 001 In [11] and In [248]
SETUP = "001's set-up: 7 tokens, EMBEDDING_DIM = 32, 2 heads, d_ff = 2 * EMBEDDING_DIM"
PROJECTIONS = ("W_query", "W_key", "W_value")


def no_dropout(weights: torch.Tensor) -> torch.Tensor:
    return weights


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- weights: state_dicts with the lab's names, from a private generator ------------------------------
def layernorm_state(seed: int, d_model: int, prefix: str = "") -> dict:
    gen = _generator(seed)
    return {f"{prefix}weight": 1 + 0.5 * torch.randn(d_model, generator=gen),
            f"{prefix}bias": 0.5 * torch.randn(d_model, generator=gen)}


def _linear_state(gen, name: str, d_in: int, d_out: int, bias: bool = True) -> dict:
    state = {f"{name}.weight": torch.randn(d_out, d_in, generator=gen) * d_in ** -0.5}
    if bias:
        state[f"{name}.bias"] = 0.3 * torch.randn(d_out, generator=gen)
    return state


def feedforward_state(seed: int, d_model: int, d_ff: int, prefix: str = "") -> dict:
    gen = _generator(seed)
    return {**_linear_state(gen, f"{prefix}linear1", d_model, d_ff), **_linear_state(gen, f"{prefix}linear2", d_ff, d_model)}


def mha_state(seed: int, d_model: int, bias: bool = True, prefix: str = "") -> dict:
    gen = _generator(seed)
    state = {}
    for name in (*PROJECTIONS, "out_proj"):
        state.update(_linear_state(gen, f"{prefix}{name}", d_model, d_model, bias))
    return state


def encoder_state(seed: int, d_model: int, d_ff: int) -> dict:
    return {**mha_state(seed, d_model, prefix="self_attn."), **feedforward_state(seed + 1, d_model, d_ff, "ff."),
            **layernorm_state(seed + 2, d_model, "norm1."), **layernorm_state(seed + 3, d_model, "norm2.")}


def decoder_state(seed: int, d_model: int, d_ff: int) -> dict:
    return {**mha_state(seed, d_model, prefix="self_attn."), **mha_state(seed + 1, d_model, prefix="cross_attn."),
            **feedforward_state(seed + 2, d_model, d_ff, "ff."),
            **{k: v for n in (1, 2, 3) for k, v in layernorm_state(seed + 2 + n, d_model, f"norm{n}.").items()}}


# -- PyTorch's layers with those weights (eval mode, dropout 0) ---------------------------------------
def _torch_attention_state(state: dict, prefix: str, into: str) -> dict:
    """The lab's three projections stacked into ``nn.MultiheadAttention``'s ``in_proj`` (query rows first)."""
    names = [f"{prefix}{p}" for p in PROJECTIONS]
    converted = {f"{into}in_proj_weight": torch.cat([state[f"{n}.weight"] for n in names]),
                 f"{into}out_proj.weight": state[f"{prefix}out_proj.weight"]}
    if f"{prefix}out_proj.bias" in state:
        converted[f"{into}in_proj_bias"] = torch.cat([state[f"{n}.bias"] for n in names])
        converted[f"{into}out_proj.bias"] = state[f"{prefix}out_proj.bias"]
    return converted


def _renamed(state: dict, renames: dict) -> dict:
    return {renames[key.split(".")[0]] + key[key.index("."):]: value for key, value in state.items()
            if key.split(".")[0] in renames}


def torch_attention(state: dict, d_model: int, num_heads: int, bias: bool = True) -> torch.nn.MultiheadAttention:
    layer = torch.nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    layer.load_state_dict(_torch_attention_state(state, "", ""))
    return layer.eval()


def torch_encoder(state: dict, d_model: int, num_heads: int, d_ff: int) -> torch.nn.TransformerEncoderLayer:
    layer = torch.nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True)
    ff = {k.removeprefix("ff."): v for k, v in state.items() if k.startswith("ff.")}
    layer.load_state_dict({**_torch_attention_state(state, "self_attn.", "self_attn."), **ff,
                           **_renamed(state, {"norm1": "norm1", "norm2": "norm2"})})
    return layer.eval()


def torch_decoder(state: dict, d_model: int, num_heads: int, d_ff: int) -> torch.nn.TransformerDecoderLayer:
    layer = torch.nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True)
    ff = {k.removeprefix("ff."): v for k, v in state.items() if k.startswith("ff.")}
    layer.load_state_dict({**_torch_attention_state(state, "self_attn.", "self_attn."),
                           **_torch_attention_state(state, "cross_attn.", "multihead_attn."), **ff,
                           **_renamed(state, {"norm1": "norm1", "norm2": "norm2", "norm3": "norm3"})})
    return layer.eval()


def end_to_end_tolerance(expected: torch.Tensor) -> dict:
    """What an end-to-end comparison with PyTorch's layer allows, everywhere alike: float32 rounding
    grows through the layer's sub-layers with the size of the values it carries (the norms' output
    scale), not with each entry's own, so 1e-4 of the largest expected entry (float32 noise is about
    1e-6 of it). A deviation of 1e-5 relative size in a sub-layer (eps added to the standard deviation)
    stays under it in every entry; a per-entry tolerance (1e-5 + 1e-4 |entry|) failed the decoder's
    comparison on 2 entries near 0 and passed the encoder's."""
    return {"atol": 1e-4 * float(expected.abs().max()), "rtol": 0.0}


def future_positions(num_tokens: int) -> torch.Tensor:
    """The judge's causal mask: True strictly above the diagonal (a query's future keys)."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)


@torch.no_grad()
def torch_encoder_output(state, x, num_heads, d_ff, mask=None):
    return torch_encoder(state, x.shape[-1], num_heads, d_ff)(x, src_mask=mask)


@torch.no_grad()
def torch_decoder_output(state, x, memory, num_heads, d_ff):
    causal = future_positions(x.shape[1])
    return torch_decoder(state, x.shape[-1], num_heads, d_ff)(x, memory, tgt_mask=causal, tgt_is_causal=True)


# -- the same layers, written out: for gradients, and for dropout's random draws -----------------------
# The formulas are the stand-ins' (the public code that answers for a failing sub-layer in a student's layer),
# over the weights of ``state`` instead of a module's.
def _weights(state: dict, prefix: str, names: tuple, drop) -> SimpleNamespace:
    """A module's stand-in view of ``state``: its linear layers by name, and its dropout."""
    def linear(name):
        return lambda x: F.linear(x, state[f"{prefix}{name}.weight"], state.get(f"{prefix}{name}.bias"))
    return SimpleNamespace(**{name: linear(name) for name in names}, dropout=drop)


def layer_norm(x, state, prefix=""):
    return stand_ins.layer_norm(SimpleNamespace(weight=state[f"{prefix}weight"], bias=state[f"{prefix}bias"]), x)


def feedforward(x, state, prefix="", drop=no_dropout):
    return stand_ins.feed_forward(_weights(state, prefix, ("linear1", "linear2"), drop), x)


def attention(query, key, value, state, num_heads, mask=None, prefix="", drop=no_dropout):
    """Multi-head attention: (B, T_q, d), (B, T_k, d), (B, T_k, d) -> (B, T_q, d); ``mask`` True = hidden."""
    return stand_ins.multi_head_attention(_weights(state, prefix, (*PROJECTIONS, "out_proj"), drop), query, key, value,
                                          mask, num_heads=num_heads)


# -- the layers' wiring, over sub-layers given as callables named as the layer's submodules -------------
# The same wiring serves the judge's trusted layer (sub-layers computed from the weights) and the wiring
# checks (the student's own submodules, called in the worker): a layer is judged on its own wiring.
ENCODER_PARTS = ("self_attn", "ff", "norm1", "norm2")
DECODER_PARTS = ("self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3")
# The lab part each sub-layer's module is (lab.toml): its stand-in answers for it where it fails.
SUBLAYER_PART = {"self_attn": "attention", "cross_attn": "attention", "ff": "feedforward", "norm1": "layernorm",
                 "norm2": "layernorm", "norm3": "layernorm"}


def encoder(x, parts, mask=None, drop=no_dropout):
    x = parts["norm1"](x + drop(parts["self_attn"](x, x, x, mask)))          # (B, T, d)
    return parts["norm2"](x + drop(parts["ff"](x)))                         # (B, T, d)


def decoder(x, memory, parts, drop=no_dropout):
    causal = future_positions(x.shape[1])                                   # (T, T), True = future
    x = parts["norm1"](x + drop(parts["self_attn"](x, x, x, causal)))        # (B, T, d)
    x = parts["norm2"](x + drop(parts["cross_attn"](x, memory, memory, None)))  # queries from x
    return parts["norm3"](x + drop(parts["ff"](x)))                         # (B, T, d)


# -- the same wiring as facts, one per wire, judged on what the layer's own sub-layers got and gave --------
# (checks.expect_wires): a wrong wire fails the check of its block only. A block's last wire is what the
# layer passes on from it (the next block's input).
def hidden(mask, queries: int, keys: int) -> torch.Tensor:
    """The (queries, keys) pairs a mask given to attention hides, as 0/1 floats: True (or, in a float
    mask, anything but 0) = hidden, the same for every batch entry and head; None hides nothing. A mask
    of other sizes answers as itself (at most its first 64 entries: a comparison names its shape)."""
    if mask is None:
        return torch.zeros(queries, keys)
    hides = torch.as_tensor(mask) != 0
    if hides.dim() < 2 or hides.dim() > 4 or hides.shape[-2:].numel() > queries * keys or hides.numel() > 2**16:
        return hides.reshape(-1)[:64].float()
    try:
        per_sequence = hides.expand(*hides.shape[:-2], queries, keys).reshape(-1, queries, keys)
    except RuntimeError:
        return hides.float()
    same = bool((per_sequence == per_sequence[:1]).all())
    return per_sequence[0].float() if same else hides.float()


def _argument(name: str, index: int, argument: str):
    """The argument of ``name``'s first call at ``index`` (or passed as ``argument``)."""
    return lambda calls: calls[name].argument(index, argument)


def _attention_wires(name: str, query, keys, mask, sizes) -> tuple:
    """What attention ``name`` must get: ``query`` and ``keys`` (``(says, source(calls, inputs))``, None
    for a query judged as the previous block's output), as its query, and its key and value, and the
    mask ``mask`` (``(says, hides(inputs, queries, keys))``), for ``sizes(inputs)``: (queries, keys)."""
    wires = () if query is None else ((f"{name} must get {query[0]} as its query", lambda calls, inputs, output: (
        _argument(name, 0, "query")(calls), query[1](calls, inputs))),)
    return (*wires,
            (f"{name} must get {keys[0]} as its key", lambda calls, inputs, output: (
                _argument(name, 1, "key")(calls), keys[1](calls, inputs))),
            (f"{name} must get {keys[0]} as its value", lambda calls, inputs, output: (
                _argument(name, 2, "value")(calls), keys[1](calls, inputs))),
            (f"{name} must get {mask[0]}", lambda calls, inputs, output: (
                hidden(_argument(name, 3, "mask")(calls), *sizes(inputs)), mask[1](inputs, *sizes(inputs)))))


def _residual(norm: str, block: str, block_input: str, source) -> tuple:
    """``norm`` must get the residual sum: ``block``'s input (``block_input``, ``source(calls, inputs)``) plus
    its output."""
    return (f"{norm} must get the residual sum {block_input} + {block}'s output", lambda calls, inputs, output: (
        _argument(norm, 0, "x")(calls), source(calls, inputs) + calls[block].output))


def _passed_on(norm: str, to: str | None, argument: tuple = (0, "x")) -> tuple:
    """The block's output, ``norm``'s, is what ``to`` gets (``to`` None: what the layer answers)."""
    if to is None:
        return f"the layer must answer {norm}'s output", lambda calls, inputs, output: (output, calls[norm].output)
    return f"{to} must get {norm}'s output", lambda calls, inputs, output: (
        _argument(to, *argument)(calls), calls[norm].output)


LAYER_INPUT = ("the layer's input x", lambda calls, inputs: inputs[0])
ENCODER_WIRES = {  # inputs: (x, mask)
    "attention": (
        *_attention_wires("self_attn", LAYER_INPUT, LAYER_INPUT, (
            "the layer's mask (True = hidden)", lambda inputs, queries, keys: hidden(inputs[1], queries, keys)),
            lambda inputs: (inputs[0].shape[1],) * 2),
        _residual("norm1", "self_attn", "x", LAYER_INPUT[1]),
        _passed_on("norm1", "ff")),
    "feed_forward": (
        _residual("norm2", "ff", "ff's input", lambda calls, inputs: calls["ff"].argument(0, "x")),
        _passed_on("norm2", None)),
}
DECODER_WIRES = {  # inputs: (x, memory)
    "self_attention": (
        *_attention_wires("self_attn", LAYER_INPUT, LAYER_INPUT, (
            "the causal mask (True strictly above the diagonal)",
            lambda inputs, queries, keys: future_positions(queries).float()), lambda inputs: (inputs[0].shape[1],) * 2),
        _residual("norm1", "self_attn", "x", LAYER_INPUT[1]),
        _passed_on("norm1", "cross_attn", (0, "query"))),
    "cross_attention": (
        *_attention_wires("cross_attn", None, ("the encoder's output (memory)", lambda calls, inputs: inputs[1]), (
            "no mask (it sees all of memory)", lambda inputs, queries, keys: torch.zeros(queries, keys)),
            lambda inputs: (inputs[0].shape[1], inputs[1].shape[1])),
        _residual("norm2", "cross_attn", "cross_attn's query",
                  lambda calls, inputs: calls["cross_attn"].argument(0, "query")),
        _passed_on("norm2", "ff")),
    "feed_forward": (
        _residual("norm3", "ff", "ff's input", lambda calls, inputs: calls["ff"].argument(0, "x")),
        _passed_on("norm3", None)),
}


def trusted_parts(state: dict, num_heads: int, names: tuple, drop=no_dropout) -> dict:
    """The sub-layers ``names`` computed by the judge from ``state`` (dropout drawn by ``drop``)."""
    def part(name):
        if name.startswith("norm"):
            return lambda x: layer_norm(x, state, f"{name}.")
        if name == "ff":
            return lambda x: feedforward(x, state, "ff.", drop)
        return lambda q, k, v, mask: attention(q, k, v, state, num_heads, mask, f"{name}.", drop)
    return {name: part(name) for name in names}


def with_stand_ins(layer, names: tuple, num_heads: int):
    """The student's layer, each of its sub-layers ``names`` answered by the lab's stand-in wherever its
    own call raises or answers with the wrong shape or dtype: the layer is judged on its own wiring."""
    return layer.standing_in({name: SUBLAYER_PART[name] for name in names}, num_heads=num_heads)


def own_parts(layer, names: tuple, gradients: dict | None = None, stream=None) -> dict:
    """The student's layer's own submodules ``names``, called in the worker: differentiable (their
    parameters' gradients collected in ``gradients``) when given, drawing on ``stream`` (a
    streaming view of the submission) when given."""
    # Imported here: the lab's notebook imports this module too, where the kit is not installed.
    from autograder.judge.checks import differentiable

    parts = {}
    for name in names:
        sub = layer.submodule(name)
        sub = sub.using(stream) if stream is not None else sub
        parts[name] = differentiable(sub, gradients, f"{name}.") if gradients is not None else sub
    return parts


def wired_otherwise(layer, output, composed, inputs: tuple, tolerance: dict) -> bool:
    """Whether ``output``, the layer's answer in a gradient check, is not its own submodules wired as the
    docstring says (``composed``), and is what the layer answers to the same ``inputs`` without gradients:
    the check then judges only what holds of gradients whatever the wiring (a layer that answers otherwise
    when its inputs require gradients is held to the composition)."""
    from autograder.judge.checks import is_close  # see own_parts

    return (not is_close(output, composed, equal_nan=True, **tolerance)
            and is_close(layer(*inputs), output, equal_nan=True, **tolerance))


def with_dropout(forward, p: float, seed: int):
    """``forward(drop=...)`` with ``nn.Dropout(p)`` in training mode, its draws made in order right after
    ``manual_seed(seed)``, as in a call through ``student.seeded(seed)``: the judge draws the same
    keep-patterns on the same machine, so no platform's random pattern is baked in."""
    with torch.random.fork_rng(devices=[]):  # the judge's own random state is left as it was
        torch.manual_seed(seed)
        return forward(drop=lambda t: F.dropout(t, p, training=True))
