"""The safe wire format between the judge and a worker that runs student code.

A message is a JSON document plus raw byte blobs. Tensors travel as dtype + shape + bytes
and are rebuilt with ``torch.frombuffer``; nothing is ever unpickled, so a worker that
runs hostile code can send wrong numbers but never objects that execute on arrival.

Frame layout: ``<u32 header length><u32 blob count><header JSON>`` then, per blob,
``<u64 length><bytes>``.
"""

from __future__ import annotations

import json
import math
import struct

import torch


# Only plain numeric dtypes may cross; decoding rejects anything else.
DTYPES = {
    name: getattr(torch, name)
    for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}

# A request's "seed" that leaves the worker's RNG where the previous request left it.
CONTINUE_STREAM = "continue"


class CodecError(ValueError):
    """A value that cannot be encoded, or a frame that is malformed or too large."""


class GeneratorSpec:
    """Stands for ``torch.Generator().manual_seed(seed)``, which cannot cross a pipe itself."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def __repr__(self) -> str:
        return f"GeneratorSpec({self.seed})"


class HandleRef:
    """A reference to an object that lives in the worker (an ``nn.Module`` it built)."""

    def __init__(self, handle_id: int, type_name: str = ""):
        self.id = int(handle_id)
        self.type_name = str(type_name)


def _encode(value, blobs: list):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, torch.Tensor):
        # A plain, compact, detached copy: subclasses and views do not survive the trip.
        plain = torch.Tensor.detach(value).to("cpu").clone(memory_format=torch.contiguous_format)
        if plain.dtype not in DTYPE_NAMES:
            raise CodecError(f"tensors of dtype {plain.dtype} are not supported")
        blobs.append(plain.reshape(-1).view(torch.uint8).numpy().tobytes() if plain.numel() else b"")
        return {"$tensor": len(blobs) - 1, "dtype": DTYPE_NAMES[plain.dtype], "shape": list(plain.shape)}
    if isinstance(value, GeneratorSpec):
        return {"$generator": value.seed}
    if isinstance(value, HandleRef):
        return {"$handle": value.id, "type": value.type_name}
    if isinstance(value, torch.Size):
        return {"$size": list(value)}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, blobs) for v in value]
        return items if isinstance(value, list) else {"$tuple": items}
    if isinstance(value, dict):
        return {"$dict": [[_encode(k, blobs), _encode(v, blobs)] for k, v in value.items()]}
    raise CodecError(f"a value of type {type(value).__name__} cannot be sent")


def encode(message) -> bytes:
    """Serialise ``message`` (JSON-like values, tensors, specs) into one frame."""
    blobs: list[bytes] = []
    header = json.dumps(_encode(message, blobs)).encode()
    parts = [struct.pack("<II", len(header), len(blobs)), header]
    for blob in blobs:
        parts += [struct.pack("<Q", len(blob)), blob]
    return b"".join(parts)


def _decode(node, blobs: list[bytes]):
    if isinstance(node, list):
        return [_decode(v, blobs) for v in node]
    if not isinstance(node, dict):
        return node
    if "$tensor" in node:
        dtype = DTYPES.get(node.get("dtype"))
        shape = node.get("shape")
        if dtype is None or not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise CodecError(f"malformed tensor header {node!r}")
        data = blobs[node["$tensor"]]
        count = math.prod(shape)
        if len(data) != count * dtype.itemsize:
            raise CodecError("tensor byte count does not match its shape")
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    if "$float" in node:
        return float(node["$float"])
    if "$tuple" in node:
        return tuple(_decode(v, blobs) for v in node["$tuple"])
    if "$size" in node:
        return torch.Size(node["$size"])
    if "$dict" in node:
        return {_decode(k, blobs): _decode(v, blobs) for k, v in node["$dict"]}
    if "$generator" in node:
        return GeneratorSpec(node["$generator"])
    if "$handle" in node:
        return HandleRef(node["$handle"], node.get("type", ""))
    raise CodecError(f"unknown node {sorted(node)!r}")


def decode(header: bytes, blobs: list[bytes]):
    """Rebuild a message from a frame's header and blobs (see :func:`read_frame`)."""
    try:
        tree = json.loads(header)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CodecError(f"malformed header: {str(exc)[:200]}") from None
    try:
        return _decode(tree, blobs)
    except (IndexError, KeyError, TypeError, ValueError, OverflowError, RecursionError, RuntimeError) as exc:
        raise CodecError(f"malformed message: {type(exc).__name__}") from None


class Unread:
    """What has come from a socket and is not read yet. A frame is read in pieces (its header's size, the
    header, each blob's size and bytes): each ``recv`` takes what has come, up to a bound, instead of the piece
    alone, so that a frame costs one or two system calls, not two or more a piece. Beyond the piece asked for it holds
    less than the least a ``recv`` asks (64 KiB): a peer that sends ahead fills the socket's buffer, not this one."""

    RECV_LEAST, RECV_MOST = 1 << 16, 1 << 20  # what one recv asks for

    def __init__(self):
        self.data = bytearray()

    def wanted(self, n: int) -> int:
        """How many bytes to ask ``recv`` for before ``n`` can be taken (0: they are here)."""
        missing = n - len(self.data)
        return 0 if missing <= 0 else min(max(missing, self.RECV_LEAST), self.RECV_MOST)

    def add(self, chunk: bytes) -> None:
        if not chunk:
            raise EOFError
        self.data += chunk

    def take(self, n: int) -> bytes:
        with memoryview(self.data) as view:  # one copy of the piece, not a slice and then its copy
            piece = bytes(view[:n])
        del self.data[:n]
        return piece


def recv_exact(sock, unread: Unread, n: int) -> bytes:
    """``n`` bytes from a blocking socket, through what came from it earlier; EOFError when the peer is gone."""
    while want := unread.wanted(n):
        unread.add(sock.recv(want))
    return unread.take(n)


def read_frame_bytes(read_exact, limit: int, header_limit: int) -> bytes:
    """One whole frame, undecoded, read with ``read_exact(n) -> bytes``; frames over ``limit`` (a header
    over ``header_limit``) are refused before their contents are read (but for what one recv took beyond their size,
    under 64 KiB, never decoded: :class:`Unread`). The lab's largest answers are a few
    hundred KiB; the caps (``Limits.frame_bytes``, ``header_bytes``) bound what a hostile worker can make
    the judge read."""
    head = read_exact(8)
    size, count = struct.unpack("<II", head)
    if size > min(limit, header_limit) or count > limit // 8:
        raise CodecError(f"a message header of {size} bytes and {count} blobs is over the limit")
    parts = [head, read_exact(size)]
    total = size
    for _ in range(count):
        length = read_exact(8)
        (n,) = struct.unpack("<Q", length)
        total += n
        if total > limit:
            raise CodecError(f"message larger than {limit} bytes")
        parts += [length, read_exact(n)]
    return b"".join(parts)


def decode_frame(frame: bytes):
    """The message back from the bytes :func:`encode` made of it."""
    view = memoryview(frame)
    try:
        size, count = struct.unpack_from("<II", view, 0)
        position = 8 + size
        header = bytes(view[8:position])
        blobs = []
        for _ in range(count):
            (n,) = struct.unpack_from("<Q", view, position)
            position += 8
            blobs.append(view[position:position + n])
            position += n
    except struct.error:
        raise CodecError("truncated frame") from None
    if position != len(frame):
        raise CodecError("truncated frame")
    return decode(header, blobs)


def read_frame(read_exact, limit: int, header_limit: int):
    """Read one frame with ``read_exact(n) -> bytes`` and decode it; refuse frames over the limits."""
    return decode_frame(read_frame_bytes(read_exact, limit, header_limit))
