"""Finding the one flipped bit behind a CRC-32 mismatch (zlib's CRC, IEEE polynomial).

A CRC-32 tells any two messages of the same length that differ in one bit
apart, and points at the bit: the checksum of the damaged bytes, XOR the
checksum they were written with, is the CRC of the error alone, which for a
single bit depends only on its distance from the end. :func:`flipped_bit`
walks back from the end one byte a step (the CRC's byte step inverted) until
the error's CRC is a single bit's: O(length), no trial and error. A damage
of more than one bit is found as a single flipped bit only by a coincidence
of about ``8 * length / 2**32``; callers check what they mend further
(a journal record must still decode).
"""

from __future__ import annotations

import zlib

__all__ = ["flipped_bit"]

_POLY = 0xEDB88320  # reflected IEEE 802.3, as zlib.crc32


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _table()
#: The table entry of each top byte: every entry's top byte is distinct, so a step inverts.
_BY_TOP = {entry >> 24: byte for byte, entry in enumerate(_TABLE)}
#: The CRC of a last byte with only bit k set (and zeros before it), by value.
_LAST_BYTE_BIT = {_TABLE[1 << k]: k for k in range(8)}


def flipped_bit(message: bytes, crc: int) -> int | None:
    """The index of the one bit whose flip makes ``zlib.crc32(message) == crc``; None if none.

    Bit ``i`` is bit ``i % 8`` (least significant first) of byte ``i // 8``.
    None as well when the checksum already holds.
    """
    error = zlib.crc32(message) ^ crc
    if error == 0:
        return None
    for distance in range(len(message)):
        k = _LAST_BYTE_BIT.get(error)
        if k is not None:
            return (len(message) - 1 - distance) * 8 + k
        byte = _BY_TOP[error >> 24]
        error = (((error ^ _TABLE[byte]) << 8) & 0xFFFFFFFF) | byte
    return None
