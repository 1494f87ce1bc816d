"""An image file's first bytes in; its format, width and height out (PNG, GIF, JPEG, WebP).

Read from the header alone, nothing decoded: enough for the email to give every image its size,
so the layout never jumps while images load.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

# A JPEG's frame header can sit after large metadata (EXIF thumbnails): read this far at most.
HEADER_BYTES = 512 * 1024
_JPEG_FRAMES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


@dataclass(frozen=True)
class ImageInfo:
    format: str
    width: int
    height: int
    size: int  # bytes of the file


class NotAnImageError(ValueError):
    pass


def read_image_info(path: Path) -> ImageInfo:
    """Raise OSError if the file cannot be read, NotAnImageError if it is no image we know."""
    with path.open("rb") as file:
        head = file.read(HEADER_BYTES)
    size = path.stat().st_size
    kind, width, height = read_image_size(head)
    return ImageInfo(kind, width, height, size)


def read_image_size(head: bytes) -> tuple[str, int, int]:
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
        width, height = struct.unpack(">II", head[16:24])
        return _checked("png", width, height)
    if head[:6] in (b"GIF87a", b"GIF89a"):
        width, height = struct.unpack("<HH", head[6:10])
        return _checked("gif", width, height)
    if head.startswith(b"\xff\xd8"):
        return _jpeg(head)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp(head)
    raise NotAnImageError("is not a PNG, JPEG, GIF or WebP image")


def _jpeg(head: bytes) -> tuple[str, int, int]:
    offset = 2
    while offset + 4 <= len(head):
        if head[offset] != 0xFF:
            break
        marker = head[offset + 1]
        if marker == 0xFF:  # fill bytes
            offset += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            offset += 2
            continue
        (length,) = struct.unpack(">H", head[offset + 2 : offset + 4])
        if marker in _JPEG_FRAMES and offset + 9 <= len(head):
            height, width = struct.unpack(">HH", head[offset + 5 : offset + 9])
            return _checked("jpeg", width, height)
        offset += 2 + length
    raise NotAnImageError("is a JPEG whose size could not be read")


def _webp(head: bytes) -> tuple[str, int, int]:
    chunk = head[12:16]
    if chunk == b"VP8 " and len(head) >= 30:
        width, height = struct.unpack("<HH", head[26:30])
        return _checked("webp", width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return _checked("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(head) >= 30:
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return _checked("webp", width, height)
    raise NotAnImageError("is a WebP image whose size could not be read")


def _checked(kind: str, width: int, height: int) -> tuple[str, int, int]:
    if width < 1 or height < 1:
        raise NotAnImageError(f"is a {kind.upper()} image of {width}×{height} pixels")
    return kind, width, height
