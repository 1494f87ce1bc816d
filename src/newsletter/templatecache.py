"""Compiled Jinja templates kept for the process by name and source, wherever the file stands.

`diff` renders each git revision from its own temporary folder, and there the templates are
most often the same text; Jinja's compile is most of a render's time. A template whose text
changed has another checksum, so it is compiled anew.
"""

from __future__ import annotations

import jinja2
from jinja2.bccache import Bucket

_KEPT = 256  # a preview's long day of template edits: past this, start again


class CompiledTemplates(jinja2.BytecodeCache):
    def __init__(self) -> None:
        self._compiled: dict[tuple[str, str], bytes] = {}

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return name  # not the folder: the checksum of the source tells two texts apart

    def load_bytecode(self, bucket: Bucket) -> None:
        if (data := self._compiled.get((bucket.key, bucket.checksum))) is not None:
            bucket.bytecode_from_string(data)

    def dump_bytecode(self, bucket: Bucket) -> None:
        if len(self._compiled) >= _KEPT:
            self._compiled.clear()
        self._compiled[(bucket.key, bucket.checksum)] = bucket.bytecode_to_string()


COMPILED_TEMPLATES = CompiledTemplates()
