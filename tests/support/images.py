"""Small real image files for tests: PNG, GIF, JPEG and WebP headers of a given size."""

from __future__ import annotations

import struct
import zlib


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 210, 220)) -> bytes:
    """A valid PNG of one colour (it compresses to almost nothing)."""
    return _png(width, height, [b"\x00" + bytes(rgb) * width] * height)


def picture(width: int, height: int, seed: int) -> bytes:
    """A PNG that reads as a picture in a screenshot: a sky-to-ground gradient in a hue picked
    by `seed`, with a horizon; each row is one colour, so it stays a few kilobytes."""
    hue = [(92, 132, 176), (104, 150, 112), (170, 120, 90), (120, 110, 170), (80, 140, 150)][
        seed % 5
    ]
    rows = []
    for y in range(height):
        t = y / max(1, height - 1)
        light = 1.25 - 0.6 * t if t < 0.62 else 0.75 - 0.25 * t
        rgb = bytes(min(255, max(0, int(c * light + 40 * (1 - t)))) for c in hue)
        rows.append(b"\x00" + rgb * width)
    return _png(width, height, rows)


def _png(width: int, height: int, rows: list[bytes]) -> bytes:
    data = zlib.compress(b"".join(rows), 9)

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int, height: int) -> bytes:
    """A JPEG's markers up to its frame header (APP0, then SOF0): enough to be measured."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def webp(width: int, height: int) -> bytes:
    """A lossless (VP8L) WebP header."""
    bits = (width - 1) | ((height - 1) << 14)
    body = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + bits.to_bytes(4, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body
