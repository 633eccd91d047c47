"""Frames: encoding, and decoding into frames or columns."""

from __future__ import annotations

import zlib

import pytest

from connector.framing import (
    HEADER,
    CorruptFrameError,
    decode_answer,
    decode_columns,
    encode_frames,
    intact_prefix,
    iter_frames,
)


def _two_appends() -> tuple[bytes, bytes]:
    first = encode_frames([b"a", b"bb"], 1_000, ["k1", None])
    second = encode_frames([b"ccc"], 2_000, ["k1"])
    return first, second


def test_columns_and_frames_describe_the_same_events() -> None:
    first, second = _two_appends()
    data = first + second

    columns = decode_columns(data, base_offset=100)

    assert columns.payloads == [b"a", b"bb", b"ccc"]
    assert columns.routing_keys == ["k1", None, "k1"]
    assert columns.ingestion_times == [1_000, 1_000, 2_000]
    assert columns.offsets[0] == 100
    assert columns.ends[-1] == 100 + len(data)
    assert columns.offsets[1:] == columns.ends[:-1]
    assert columns.offsets[2] == 100 + len(first)
    frames = list(iter_frames(data, 100))
    assert [(f.offset, f.end, f.ingestion_time, f.routing_key, f.payload) for f in frames] == list(
        zip(*columns, strict=True)
    )


def test_a_flipped_byte_fails_the_checksum_unless_unverified() -> None:
    data = bytearray(b"".join(_two_appends()))
    data[-1] ^= 0xFF

    with pytest.raises(
        CorruptFrameError, match="the frame at offset .* fails its checksum"
    ) as found:
        decode_columns(bytes(data))
    assert decode_columns(bytes(data), verify=False).payloads[-1] != b"ccc"
    assert found.value.offset == intact_prefix(bytes(data))[0] > 0
    assert intact_prefix(bytes(data)).reason == "fails its checksum"
    assert intact_prefix(b"".join(_two_appends())) == (len(data), 3, None)


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (HEADER.size - 1, "the frame at offset 0 has a header cut short"),
        (HEADER.size + 2, "claims"),
    ],
)
def test_a_cut_frame_is_named(cut: int, message: str) -> None:
    data = encode_frames([b"payload"], 1_000, ["key"])

    with pytest.raises(CorruptFrameError, match=message):
        decode_columns(data[:cut])


def test_a_body_too_short_for_its_key_length_is_corrupt() -> None:
    data = HEADER.pack(1, 0, 1_000) + b"\x00"

    with pytest.raises(CorruptFrameError, match="claims 1 bytes"):
        decode_columns(data, verify=False)


def test_an_answer_whose_checksum_matches_decodes_as_its_frames_checked_one_by_one() -> None:
    data = b"".join(_two_appends())

    assert decode_answer(data, 100, zlib.crc32(data)) == decode_columns(data, 100)
    assert decode_answer(data, 100, None) == decode_columns(data, 100)


def test_a_flipped_bit_anywhere_in_an_answer_is_named_at_its_frame_despite_its_checksum() -> None:
    data = b"".join(_two_appends())
    checksum = zlib.crc32(data)  # the store's, over the bytes it checked
    starts = decode_columns(data, 100).offsets
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x10
        with pytest.raises(CorruptFrameError) as found:
            decode_answer(bytes(damaged), 100, checksum)
        frame_start = max(s for s in starts if s <= 100 + position)
        assert found.value.offset == frame_start, position


def test_an_answer_failing_its_checksum_with_every_frame_intact_is_refused() -> None:
    data = b"".join(_two_appends())

    with pytest.raises(CorruptFrameError, match="answer from offset 100 .* damaged on its way"):
        decode_answer(data, 100, zlib.crc32(data) ^ 1)
