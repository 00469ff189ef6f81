"""Reading the pixels of a browser's PNG screenshot with zlib alone (no imaging library here).

Enough of PNG for what Chromium writes: 8-bit RGB or RGBA, not interlaced, any row filter.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: colour type -> bytes per pixel (8-bit samples)
CHANNELS = {2: 3, 6: 4}

Pixel = tuple[int, int, int]


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    #: one bytes object per row, ``channels`` bytes per pixel
    rows: list[bytes]
    channels: int

    def pixel(self, x: int, y: int) -> Pixel:
        start = x * self.channels
        r, g, b = self.rows[y][start : start + 3]
        return r, g, b

    def colours_in(self, left: int, top: int, right: int, bottom: int) -> Counter[Pixel]:
        """How many pixels of each colour the box holds (clipped to the image)."""
        return Counter(
            self.pixel(x, y)
            for y in range(max(top, 0), min(bottom, self.height))
            for x in range(max(left, 0), min(right, self.width))
        )


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(kind: int, row: bytearray, above: bytes, bpp: int) -> bytes:
    for i in range(len(row)):
        left = row[i - bpp] if i >= bpp else 0
        up = above[i]
        corner = above[i - bpp] if i >= bpp else 0
        if kind == 1:
            row[i] = (row[i] + left) & 0xFF
        elif kind == 2:
            row[i] = (row[i] + up) & 0xFF
        elif kind == 3:
            row[i] = (row[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            row[i] = (row[i] + _paeth(left, up, corner)) & 0xFF
    return bytes(row)


def read_png(data: bytes) -> Image:
    """The decoded image; fails on anything but the 8-bit RGB(A) PNGs a browser writes."""
    assert data.startswith(SIGNATURE), "not a PNG"
    offset, compressed, header = len(SIGNATURE), b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        offset += length + 12
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            compressed += body
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in CHANNELS and not interlace, (depth, colour, interlace)
    bpp = CHANNELS[colour]
    raw, stride = zlib.decompress(compressed), width * bpp
    rows, above = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        above = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), above, bpp)
        rows.append(above)
    return Image(width, height, rows, bpp)
