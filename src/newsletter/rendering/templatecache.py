"""Compiled Jinja templates kept by name and source, wherever the file stands: for the process,
and for the user between processes (state/usercache.py).

`diff` renders each git revision from its own temporary folder, and there the templates are
most often the same text; Jinja's compile is most of a render's time, and every command that
renders (check, a test send, a send) is a new process that compiled the same templates again.
A template whose text changed has another checksum, so it is compiled anew. Code compiled for
the same text in another folder is given this file's name before it is used, so an error in a
render names the template the editor has. `page_environment` is the one set-up of the tool's
own HTML pages (the preview, the site, the click report, the diff page): every value escaped,
a missing variable an error.
"""

from __future__ import annotations

import marshal
import sys
from pathlib import Path
from types import CodeType

import jinja2
from jinja2.bccache import Bucket

from newsletter.state import usercache

_KEPT = 256  # a preview's long day of template edits: past this, start again
_KIND = "templates"
# Code compiled by another Python or Jinja is not this one's: their versions are in every key.
_VERSIONS = f"{sys.implementation.cache_tag}\0jinja2 {jinja2.__version__}"


class CompiledTemplates(jinja2.BytecodeCache):
    """One Environment set-up's compiled templates: `setup` names it, since the options an
    Environment compiles with (autoescape, trim_blocks...) are in the code it makes."""

    def __init__(self, setup: str) -> None:
        self._setup = setup
        self._compiled: dict[tuple[str, str], CodeType] = {}

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return f"{name}\0{filename or ''}"

    def load_bytecode(self, bucket: Bucket) -> None:
        name, filename = bucket.key.split("\0", 1)
        code = self._compiled.get((name, bucket.checksum))
        if code is None:
            code = self._load_kept(name, bucket.checksum)
        if code is not None:
            self._compiled[(name, bucket.checksum)] = code
            bucket.code = _retargeted(code, filename) if filename else code

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is None:
            return
        name = bucket.key.split("\0", 1)[0]
        if len(self._compiled) >= _KEPT:
            self._compiled.clear()
        self._compiled[(name, bucket.checksum)] = bucket.code
        usercache.keep(_KIND, self._user_key(name, bucket.checksum), marshal.dumps(bucket.code))

    def _load_kept(self, name: str, checksum: str) -> CodeType | None:
        data = usercache.load(_KIND, self._user_key(name, checksum))
        if data is None:
            return None
        try:
            # Safe to load: usercache serves only a folder no other user can write.
            code = marshal.loads(data)  # noqa: S302
        except (EOFError, ValueError, TypeError):
            return None  # a torn or foreign file: compile again
        return code if isinstance(code, CodeType) else None

    def _user_key(self, name: str, checksum: str) -> str:
        return f"{_VERSIONS}\0{self._setup}\0{name}\0{checksum}"


def _retargeted(code: CodeType, filename: str) -> CodeType:
    """`code` with `filename` as its file, in it and every function it defines: what a render
    error's template name and line are read from."""
    if code.co_filename == filename:
        return code
    consts = tuple(
        _retargeted(const, filename) if isinstance(const, CodeType) else const
        for const in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


# The render's set-up (rendering/render.py's template_environment): bump the name when its
# options change.
COMPILED_TEMPLATES = CompiledTemplates("render 1")


def page_environment(folder: Path) -> jinja2.Environment:
    """Templates in `folder`, every value escaped, a missing variable an error."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
