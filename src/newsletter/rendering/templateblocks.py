"""The project's own content templates -> the kinds of block they have no branch for.

A project may keep its own copy of templates/email/content.mjml (or content.txt), made before a
kind of block existed (tables came with issue 30). Such a copy renders an issue's table as
nothing at all: `check` warns at the issue's first block of that kind instead. Which kinds a
copy handles is read from the template's own comparisons (`b.kind == "table"`,
`b.kind in ("paragraph", "heading")`), by Jinja's parser.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
from jinja2 import nodes

from newsletter.markup import Note

# The templates that lay out content blocks, each for its part of the email.
CONTENT_TEMPLATES = {"content.mjml": "HTML part", "content.txt": "text part"}
_NAMES = {"code_block": "code block", "rule": "rule (---)", "list": "list", "quote": "quote"}
_NAMES |= {"callout": "callout (::: or !!!)"}


def unhandled_blocks(
    templates_dir: Path, block_lines: tuple[tuple[str, int], ...], shipped: tuple[Path, ...]
) -> list[Note]:
    """A warning at the first block of each kind the project's own content templates (those in
    `templates_dir` that are not the `shipped` defaults) have no branch for."""
    notes: list[Note] = []
    if templates_dir in shipped:
        return notes
    for name, part in CONTENT_TEMPLATES.items():
        handled = handled_kinds(templates_dir / name)
        if not handled:  # not the project's own, or not dispatched by kind: nothing to tell
            continue
        for kind, line in block_lines:
            if kind not in handled:
                what = _NAMES.get(kind, kind)
                notes.append(
                    Note(
                        "warning",
                        "markup",
                        line,
                        f"this {what} is left out of the {part}: the project's own "
                        f"templates/email/{name} has no branch for {kind!r} blocks (it predates "
                        f"them); copy the {kind!r} branch from the shipped {name}, or delete "
                        "the copy to use the shipped one",
                    )
                )
    return notes


def handled_kinds(path: Path) -> frozenset[str]:
    """The block kinds `path` compares `.kind` with; none if it is missing or does not parse
    (rendering names that error)."""
    try:
        tree = jinja2.Environment(autoescape=True).parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, jinja2.TemplateSyntaxError):
        return frozenset()
    found: set[str] = set()
    for compare in tree.find_all(nodes.Compare):
        if not _is_kind(compare.expr):
            continue
        for operand in compare.ops:
            value = operand.expr
            values = value.items if isinstance(value, nodes.Tuple | nodes.List) else [value]
            found |= {v.value for v in values if isinstance(v, nodes.Const)}
    return frozenset(str(kind) for kind in found)


def _is_kind(expr: nodes.Node) -> bool:
    """`b.kind` or `b["kind"]`."""
    if isinstance(expr, nodes.Getattr):
        return expr.attr == "kind"
    return (
        isinstance(expr, nodes.Getitem)
        and isinstance(expr.arg, nodes.Const)
        and expr.arg.value == "kind"
    )
