"""The judge reads a worker's answers safely: only plain data comes back, malformed frames fail."""

import io
import socket
import struct
import threading

import pytest
import torch

from autograder.harness.codec import CodecError, GeneratorSpec, Unread, encode, read_frame, recv_exact
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


class CountedSocket:
    """A socket whose recv calls are counted."""

    def __init__(self, sock):
        self.sock, self.recvs = sock, 0

    def recv(self, n: int) -> bytes:
        self.recvs += 1
        return self.sock.recv(n)


def test_a_frame_that_has_come_is_read_in_one_recv_and_less_than_64_kib_is_held_ahead():
    """A frame is read in pieces (its header's size, the header, each blob's size and bytes): each recv takes what has
    come (one recv a piece was four or more a frame, on each side of every call), and a peer that sends ahead is read
    less than 64 KiB beyond the piece asked for."""
    first, second = {"t": torch.arange(6.0), "u": torch.ones(3)}, ("second", torch.zeros(2, 2))
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(encode(first) + encode(second))
        sock, unread = CountedSocket(ours), Unread()
        read = lambda n: recv_exact(sock, unread, n)  # noqa: E731
        back = read_frame(read, DEFAULTS.frame_bytes, DEFAULTS.header_bytes)
        assert sock.recvs == 1 and torch.equal(back["u"], first["u"])
        assert read_frame(read, DEFAULTS.frame_bytes, DEFAULTS.header_bytes)[0] == "second" and sock.recvs == 1
        sender = threading.Thread(target=theirs.sendall, args=(b"\0" * (3 << 20),))
        sender.start()
        read(8)
        assert len(unread.data) < Unread.RECV_LEAST
        assert read((3 << 20) - 8) == b"\0" * ((3 << 20) - 8)
        sender.join()
        theirs.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            read(1)
