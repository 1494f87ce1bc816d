"""The markers check: a template's own leftovers, named by the template's file and line.

An issue's text never passes through Jinja (it reaches the templates as values), so `{{`, `{%`
and `{#` in a title, a paragraph or a code block are shown as written, and are no fault: a
weekly about Helm, Jinja or Vue is full of them. What is a fault is what the templates
themselves would put in front of every reader: a marker in their literal text (a `{% raw %}`
block, a quoted "{{"), and an MJML tag MRML did not know and passed through (`<mj-sectoin>`).
The first is read from the templates' syntax trees; the second is found in the sample's HTML
part (where an issue's text cannot put a tag: it is escaped) and traced back to the template
line. (A `__NL_` word no reader's value fills stops the sample message itself: message.py.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from html.parser import HTMLParser
from typing import Any

import jinja2
from jinja2 import meta, nodes

from newsletter.checks.lint import Finding
from newsletter.config.settings import Settings
from newsletter.errors import display_path
from newsletter.rendering.htmlpart import HTML_TEMPLATE
from newsletter.rendering.render import TEXT_TEMPLATE, template_environment
from newsletter.state import usercache

# Only the openers: a closing `}}` is also how CSS closes an @media block.
_OPENERS = re.compile(r"\{\{|\{%|\{#")
_HINT = "remove it, or write the text it was meant to show"
# What the templates' parse found, kept per user by the templates' text (state/usercache.py):
# a command is a new process, and the parse costs more than the render's checks. Bump it when
# what is kept changes.
_KIND = "markers"
_FORMAT = "markers 1"


def check_markers(settings: Settings, html: str) -> list[Finding]:
    """Errors for what the templates would show every reader as code, each at its template
    line: markers in their own text, and MJML tags left in the sample's `html` part (not in
    its text part, where an issue may well write `<mj-text>`, as a weekly about MJML would)."""
    sources = dict(_template_sources(template_environment(settings.templates_dir)))
    findings = [
        Finding(
            "error",
            "markers",
            f"{where}: the template's own text has {marker!r}, "
            f"which every reader would see as written; {_HINT}",
        )
        for where, marker in _literal_markers(tuple(sources.items()))
    ]
    for leftover, why in _html_leftovers(html):
        where = _first_line(sources, leftover)
        place = f"{where}: " if where else ""
        findings.append(
            Finding(
                "error",
                "markers",
                f"{place}the HTML part still contains {leftover!r}: {why}; {_HINT}",
            )
        )
    return findings


def _template_sources(env: jinja2.Environment) -> Iterator[tuple[str, str]]:
    """(file, source) of issue.mjml, issue.txt and every template they import or include."""
    assert env.loader is not None
    pending, seen = [HTML_TEMPLATE, TEXT_TEMPLATE], set()
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        try:
            source, filename, _ = env.loader.get_source(env, name)
        except jinja2.TemplateNotFound:
            continue  # the render says so, with the folders it looked in
        yield display_path(filename or name), source
        pending += _references(source)


@lru_cache(maxsize=32)
def _references(source: str) -> tuple[str, ...]:
    """The templates `source` imports or includes by name (cached: parsing costs more than
    the render's checks, and the preview checks at every save)."""
    key = json.dumps([_FORMAT, "references", source])
    if (kept := _kept(key)) is not None:
        return tuple(str(name) for name in kept)
    try:
        tree = jinja2.Environment(autoescape=True).parse(source)  # only parses
    except jinja2.TemplateSyntaxError:
        return ()  # the render names its line
    found = tuple(n for n in meta.find_referenced_templates(tree) if n is not None)
    usercache.keep(_KIND, key, json.dumps(found).encode())
    return found


@lru_cache(maxsize=8)
def _literal_markers(sources: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """("file:line", marker) for each opener Jinja would output as text: in literal template
    data (a raw block) or a string constant printed as it is. Cached: the preview checks at
    every save, and the templates seldom change."""
    key = json.dumps([_FORMAT, "literal", sources])
    if (kept := _kept(key)) is not None:
        return tuple((str(where), str(marker)) for where, marker in kept)
    found = tuple(_find_literal_markers(sources))
    usercache.keep(_KIND, key, json.dumps(found).encode())
    return found


def _kept(key: str) -> list[Any] | None:
    """A list kept for `key`, or None (none kept, or a file that is not what was kept)."""
    data = usercache.load(_KIND, key)
    if data is None:
        return None
    try:
        kept = json.loads(data)
    except ValueError:
        return None
    if not isinstance(kept, list) or not all(
        isinstance(item, str)
        or (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item))
        for item in kept
    ):
        return None
    return kept


def _find_literal_markers(sources: tuple[tuple[str, str], ...]) -> Iterator[tuple[str, str]]:
    env = jinja2.Environment(autoescape=True)  # only parses: nothing is rendered here
    for path, source in sources:
        try:
            tree = env.parse(source)
        except jinja2.TemplateSyntaxError:
            continue
        texts: list[tuple[int, object]] = [
            (n.lineno, n.data) for n in tree.find_all(nodes.TemplateData)
        ]
        # A string printed as it is (`{{ "{{" }}`), not an argument or a comparison.
        texts += [
            (n.lineno, n.value)
            for output in tree.find_all(nodes.Output)
            for n in output.nodes
            if isinstance(n, nodes.Const)
        ]
        for lineno, value in sorted(texts, key=lambda t: t[0]):
            if isinstance(value, str):
                for match in _OPENERS.finditer(value):
                    yield f"{path}:{lineno + value.count(chr(10), 0, match.start())}", match.group()


def _html_leftovers(html: str) -> Iterator[tuple[str, str]]:
    if "<mj-" not in html:  # an issue's own "<mj-" is escaped: only a template writes this
        return
    tags = _Tags()
    tags.feed(html)
    for tag in sorted(tags.mjml):
        yield f"<{tag}", "MJML has no such tag (check its spelling) and passed it through"


def _first_line(sources: dict[str, str], needle: str) -> str:
    for path, source in sources.items():
        index = source.find(needle)
        if index >= 0:
            return f"{path}:{source.count(chr(10), 0, index) + 1}"
    return ""


class _Tags(HTMLParser):
    """The element names of a page that begin with mj- (MJML's, which MRML should have
    compiled away)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.mjml: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag.startswith("mj-"):
            self.mjml.add(tag)
