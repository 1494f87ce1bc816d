"""Compiled Jinja templates kept for the process by name and source, wherever the file stands.

`diff` renders each git revision from its own temporary folder, and there the templates are
most often the same text; Jinja's compile is most of a render's time. A template whose text
changed has another checksum, so it is compiled anew. `page_environment` is the one set-up of
the tool's own HTML pages (the preview, the site, the click report, the diff page): every value
escaped, a missing variable an error.
"""

from __future__ import annotations

from pathlib import Path

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


def page_environment(folder: Path) -> jinja2.Environment:
    """Templates in `folder`, every value escaped, a missing variable an error."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
