"""The keys a reader has seen, each with the line it was first seen on, in memory that does not
grow with the list: a key in, the line of its first sighting (or None) out.

Each key is kept as a 64-bit hash with its line, in a dict of at most `SeenKeys.TABLE / 2`
entries (C-speed lookups: the check costs a reader little next to reading the row). A full dict
is written to a temporary file as an open-addressing table of `TABLE` slots (linear probing, half
full: a "run") and a new one begun, so memory holds one dict and a Bloom filter of a fixed size
over the hashes written out. A new key whose bits the filter lacks cannot be in a run
and is added at once; only the filter's rare false positives and true duplicates read the runs,
one small read at the slot the hash names in each. Two different keys share a hash with
probability about n²/2⁶⁵ for n keys.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from typing import BinaryIO

# Slots read from a run at a time: a probe sequence in a half-full table is rarely longer.
_READ = 64


class SeenKeys:
    """A set of keys with the line each was first added on; `close` removes its runs."""

    TABLE = 1 << 18  # slots of the in-memory table at most (a power of two)
    BLOOM = 1 << 25  # bits of the filter over the runs (a power of two)

    def __init__(self) -> None:
        self._table: dict[int, int] = {}  # hash -> line, at most TABLE // 2 of them
        self._bloom = bytearray()  # made at the first run
        self._runs: list[tuple[int, int]] = []  # (offset in the file, slots) of each run
        self._file: BinaryIO | None = None

    def add(self, key: str, line: int) -> int | None:
        """Record `key` seen on `line`; the line it was first seen on if it was seen before."""
        value = hash(key) & 0xFFFF_FFFF_FFFF_FFFF or 1  # 0 marks an empty slot in a run
        first = self._table.get(value)
        if first is not None:
            return first
        if self._runs and self._may_be_written(value):
            first = self._written_line(value)
            if first is not None:
                return first
        self._table[value] = line
        if len(self._table) * 2 >= self.TABLE:
            self._write_run()
        return None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> SeenKeys:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the filter over the runs -----------------------------------------------------------

    def _bits(self, value: int) -> tuple[int, int]:
        # Two probes from independent halves of the hash.
        mask = self.BLOOM - 1
        return value & mask, (value >> 32) & mask

    def _may_be_written(self, value: int) -> bool:
        bloom = self._bloom
        a, b = self._bits(value)
        return bool((bloom[a >> 3] >> (a & 7)) & 1 and (bloom[b >> 3] >> (b & 7)) & 1)

    # -- runs -------------------------------------------------------------------------------

    def _write_run(self) -> None:
        """The dict to the file as a half-full open-addressing table (a lookup probes it)."""
        if self._file is None:
            # Kept open until close(): the runs live in it (unlinked already, gone with it).
            self._file = tempfile.TemporaryFile(prefix="newsletter-seen-")  # noqa: SIM115
            self._bloom = bytearray(self.BLOOM >> 3)
        slots = self.TABLE
        mask = slots - 1
        hashes = array("Q", bytes(8 * slots))
        lines = array("I", bytes(4 * slots))
        bloom = self._bloom
        for value, line in self._table.items():
            slot = value & mask
            while hashes[slot]:
                slot = (slot + 1) & mask
            hashes[slot] = value
            lines[slot] = line
            a, b = self._bits(value)
            bloom[a >> 3] |= 1 << (a & 7)
            bloom[b >> 3] |= 1 << (b & 7)
        file = self._file
        offset = file.seek(0, os.SEEK_END)
        file.write(hashes.tobytes())
        file.write(lines.tobytes())
        file.flush()
        self._runs.append((offset, slots))
        self._table = {}

    def _written_line(self, value: int) -> int | None:
        assert self._file is not None
        fd = self._file.fileno()
        for offset, slots in self._runs:
            slot = _find(fd, offset, slots, value)
            if slot is not None:
                (line,) = array("I", os.pread(fd, 4, offset + 8 * slots + 4 * slot))
                return line
        return None


def _find(fd: int, offset: int, slots: int, value: int) -> int | None:
    """The slot of `value` in the run at `offset` (a table of `slots`), probing as `add` does."""
    slot = value & (slots - 1)
    left = slots  # a probe may wrap past the end, and a first read may stop at it
    while left:
        count = min(_READ, slots - slot, left)
        chunk = array("Q", os.pread(fd, 8 * count, offset + 8 * slot))
        for i, found in enumerate(chunk):
            if found == value:
                return slot + i
            if found == 0:
                return None
        slot = (slot + count) % slots
        left -= count
    return None
