"""The worker runs student code, so what it sends is hostile: fuzz the grader's decoder with
truncated, oversized, mistyped and malicious frames. Each is refused with ValueError (or, from
a pipe, EOFError for an impossible length) in bounded time; no tensor it builds reaches past its
storage, and all of a message's tensors together span at most MAX_MESSAGE bytes. "Bounded" is
the hang guard's: no time is measured (the machine's load would decide it)."""

from __future__ import annotations

import io
import os
import pickle
import struct
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mha_kit.runner.framing import (
    HEADER,
    MAX_MESSAGE,
    MAX_PICKLE,
    _span,
    decode,
    encode,
    frame,
    receive,
)

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.timeout(300)  # a decoder that hangs fails here, not after 15 minutes


def _claims(value: object) -> bytes:
    """A pickle whose ("tensor", ...) and ("same", i) tuples are sent as tensor claims, as a
    worker that wrote its own pickle could."""

    class Claims(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return obj if isinstance(obj, tuple) and obj[:1] in (("tensor",), ("same",)) else None

    buffer = io.BytesIO()
    Claims(buffer, protocol=5).dump(value)
    return buffer.getvalue()


def _decoded_or_refused(body: bytes) -> object:
    try:
        return decode(body)
    except (ValueError, pickle.UnpicklingError, EOFError, struct.error, TypeError, KeyError,
            IndexError, AttributeError, OverflowError, RuntimeError, MemoryError) as err:
        return err  # `receive` turns every one of these into ValueError


def _fits(tensor: torch.Tensor) -> bool:
    if tensor.device.type == "meta":
        return True
    span = _span(tuple(tensor.shape), tensor.stride(), tensor.storage_offset())
    return span * tensor.element_size() <= tensor.untyped_storage().nbytes()


VALID = encode({"value": (torch.arange(6.0).view(2, 3)[:, 1:], [1, "two", 3.0]),
                "ok": True})[HEADER.size:]


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes_are_refused(body):
    assert isinstance(_decoded_or_refused(body), Exception)


@FUZZ
@given(st.integers(0, len(VALID) - 1))
def test_every_truncation_of_a_real_frame_is_refused(cut):
    assert isinstance(_decoded_or_refused(VALID[:cut]), Exception)


@FUZZ
@given(st.integers(0, len(VALID) - 1), st.integers(0, 255))
def test_a_flipped_byte_gives_the_value_or_a_refusal(at, byte):
    body = bytearray(VALID)
    body[at] = byte
    value = _decoded_or_refused(bytes(body))
    tensors = value["value"][:1] if isinstance(value, dict) and isinstance(
        value.get("value"), tuple) else ()
    assert all(_fits(t) for t in tensors if isinstance(t, torch.Tensor))


# Sizes, strides and offsets as an attacker picks them: small, zero (broadcast), negative,
# huge, or anything a 64-bit integer holds.
_INTS = (st.sampled_from([0, 0, 1, 2, 3, -1, 2**20, 2**31, 2**40, 2**62])
         | st.integers(-3, 64) | st.integers(-2**63, 2**63 - 1))
# Shapes and strides mostly of one length (a claim the reader must look into), sometimes not.
_DIMS = st.integers(0, 4).flatmap(lambda n: st.tuples(
    st.lists(_INTS, min_size=n, max_size=n).map(tuple),
    st.lists(_INTS, min_size=n, max_size=n).map(tuple))) | st.tuples(
    st.lists(_INTS, max_size=5).map(tuple), st.lists(_INTS, max_size=5).map(tuple))
_CLAIM = st.builds(
    lambda index, dtype, dims, offset, device, grad, parameter: (
        "tensor", index, dtype, *dims, offset, device, grad, parameter),
    st.none() | st.integers(-2, 3),
    st.sampled_from(["float32", "float64", "bool", "int64", "complex128", "qint8", "nope", ""]),
    _DIMS, _INTS, st.sampled_from(["cpu", "meta", "cuda", "cuda:7", "mps", "xla", "", "cpu:0"]),
    st.booleans(), st.booleans())


@FUZZ
@given(st.lists(_CLAIM, min_size=1, max_size=4),
       st.lists(st.binary(max_size=64), max_size=3))
def test_tensor_claims_build_only_tensors_that_fit_their_storage(claims, storages):
    value = _decoded_or_refused(frame(_claims(claims), storages)[HEADER.size:])
    if not isinstance(value, Exception):
        assert all(_fits(t) for t in value)
        # what they span, however they alias (broadcast views too), stays within a message
        assert sum(t.numel() * t.element_size() for t in value) <= MAX_MESSAGE


@FUZZ
@given(st.integers(1, 200_000), st.sampled_from(["list", "dict", "tuple"]))
def test_deep_nesting_is_decoded_or_refused_in_bounded_time(depth, kind):
    opener = {"list": b"]", "dict": b"}", "tuple": b")"}[kind]
    body = b"\x80\x05" + opener * depth + b"."  # empty containers, never closed into one
    _decoded_or_refused(frame(body[:MAX_PICKLE], [])[HEADER.size:])


def test_an_impossible_length_is_refused_without_reading_it():
    read, write = os.pipe()
    try:
        os.write(write, HEADER.pack(MAX_MESSAGE + 1))
        try:  # waiting for the body would last until the deadline: the hang guard's failure
            receive(read, time.monotonic() + 3600)
            raise AssertionError("an impossible length was read")
        except EOFError:
            pass
    finally:
        os.close(read)
        os.close(write)


def test_a_header_claiming_terabytes_of_tensor_is_refused():
    claim = ("tensor", 0, "float64", (2**20, 2**20), (2**20, 1), 0, "cpu", False, False)
    assert isinstance(_decoded_or_refused(frame(_claims(claim), [bytes(8)])[HEADER.size:]),
                      Exception)


def test_a_tensor_sent_twice_arrives_as_one_and_a_false_reference_is_refused():
    x = torch.arange(6.0).view(2, 3)
    first, second, view = decode(encode((x, x, x.t()))[HEADER.size:])
    assert first is second and view is not first
    assert view.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
    tensor = ("tensor", 0, "float64", (1,), (1,), 0, "cpu", False, False)
    for claim in ([("same", 0)], [tensor, ("same", 1)], [tensor, ("same", -1)],
                  [tensor, ("same", "0")], [tensor, ("same", 0, 0)]):
        body = frame(_claims(claim), [bytes(8)])[HEADER.size:]
        assert isinstance(_decoded_or_refused(body), Exception), claim
    body = frame(_claims([tensor, ("same", 0)]), [bytes(8)])[HEADER.size:]
    same = _decoded_or_refused(body)
    assert same[0] is same[1], same
