"""The judge reads a worker's answers safely: only plain data comes back, malformed frames fail."""

import io
import struct

import pytest
import torch

from autograder.harness.codec import CodecError, GeneratorSpec, encode, read_frame
from autograder.limits import DEFAULTS


def roundtrip(value):
    stream = io.BytesIO(encode(value))
    return read_frame(stream.read, DEFAULTS.frame_bytes, DEFAULTS.header_bytes)


def test_roundtrip_keeps_values_dtypes_and_shapes():
    value = {"t": torch.arange(6, dtype=torch.float64).reshape(2, 3), "b": torch.tensor([True, False]),
             "nested": (1, 2.5, float("-inf"), None, "$tensor", [torch.zeros(0, 3)]), "g": GeneratorSpec(7)}
    back = roundtrip(value)
    assert torch.equal(back["t"], value["t"]) and back["t"].dtype == torch.float64
    assert torch.equal(back["b"], value["b"])
    assert back["nested"][:5] == (1, 2.5, float("-inf"), None, "$tensor")
    assert back["nested"][5][0].shape == (0, 3)
    assert back["g"].seed == 7


def test_a_tensor_subclass_arrives_as_a_plain_tensor():
    class Sneaky(torch.Tensor):
        def __eq__(self, other):
            return True

    back = roundtrip(torch.ones(2).as_subclass(Sneaky))
    assert type(back) is torch.Tensor


def frame(header: bytes, blobs=()):
    parts = [struct.pack("<II", len(header), len(blobs)), header]
    for blob in blobs:
        parts += [struct.pack("<Q", len(blob)), blob]
    return io.BytesIO(b"".join(parts)).read


@pytest.mark.parametrize("header, blobs", [
    (b"not json", []),
    (b'{"$tensor": 0, "dtype": "object", "shape": [1]}', [b"\0" * 8]),
    (b'{"$tensor": 0, "dtype": "float32", "shape": [3]}', [b"\0" * 8]),
    (b'{"$tensor": 1, "dtype": "float32", "shape": [1]}', [b"\0" * 4]),
    (b'{"$pickle": "gASV"}', []),
])
def test_malformed_frames_are_refused(header, blobs):
    with pytest.raises(CodecError):
        read_frame(frame(header, blobs), DEFAULTS.frame_bytes, DEFAULTS.header_bytes)


def test_oversized_frames_are_refused_before_reading_them():
    with pytest.raises(CodecError):
        read_frame(frame(b"{}"), 1, DEFAULTS.header_bytes)
