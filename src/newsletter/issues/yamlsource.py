"""YAML text in (an issue file, or a Markdown issue's front matter); the data, the line of every
value and every fault out.

YAML is composed into nodes first so each value keeps the line it was written on; Pydantic's error
locations are later mapped back to those lines. What YAML loaders let through silently is a fault:
duplicate keys, aliases, values a constructor cannot build (`date: 2021-02-30`). A syntax error
names the value to quote, at its line (`title: Rust 1.84: released` -> `title: "Rust 1.84:
released"`), instead of PyYAML's "mapping values are not allowed here".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from newsletter.errors import Problem
from newsletter.fields import check_placeholders

Loc = tuple[str | int, ...]
# sections[0].items[0].links[0].url is 6 levels deep; libyaml allows 1,000, which is enough to
# exhaust Python's stack in whatever walks the result.
MAX_DEPTH = 12
_STR_TAG = "tag:yaml.org,2002:str"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_SCALARS = yaml.constructor.SafeConstructor()
# libyaml's parser keeps node marks too and is much faster than the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KEY_VALUE = re.compile(
    r"^(?P<indent>\s*(?:-\s+)?)(?P<key>[A-Za-z_][\w-]*):[ \t]+(?P<value>.*?)\s*$"
)
# The keys whose values are text: a syntax error there is usually text YAML misread.
TEXT_KEYS = {"title", "summary", "intro", "outro", "preheader", "label", "url", "src", "alt"}
# What a plain YAML value must not start with: each means something else to YAML.
_INDICATORS = {
    "[": "a list",
    "{": "a mapping",
    "*": "an alias",
    "&": "an anchor",
    "!": "a tag",
    "|": "a block of text",
    ">": "a block of text",
    "%": "a directive",
    "@": "a reserved character",
    "`": "a reserved character",
    '"': "a quoted value",
    "'": "a quoted value",
}


@dataclass(frozen=True)
class Scalar:
    """How a text value was written, for the fields read as Markdown."""

    first_line: int  # the line its text starts on (the one after `|` or `>` for a block)
    # A folded block (`>`) read as written, with its line breaks: Markdown folds lines itself,
    # without putting a space between two Chinese characters as YAML's folding does.
    literal: str | None = None


@dataclass
class Source:
    data: Any = None
    lines: dict[Loc, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    scalars: dict[Loc, Scalar] = field(default_factory=dict)


def read_yaml(text: str, name: str, first_line: int = 1) -> Source:
    """`text` parsed; its lines count from `first_line` (front matter starts on line 2)."""
    loader = _LOADER(text)
    offset = first_line - 1
    try:
        node = loader.get_single_node()
        if node is None:
            return Source(problems=[Problem(name, first_line, "", "is empty")])
        index = _Index(name, text, offset)
        index.walk(node, (), node.start_mark.line + 1 + offset)
        if index.problems:
            return Source(lines=index.lines, problems=index.problems)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        return Source(problems=[_syntax_problem(text, name, exc, offset)])
    except yaml.YAMLError as exc:
        return Source(problems=[Problem(name, None, "", f"is not valid YAML: {exc}")])
    finally:
        loader.dispose()
    return Source(data, index.lines, [], index.scalars)


def _syntax_problem(text: str, name: str, exc: yaml.MarkedYAMLError, offset: int) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    what = " ".join(s for s in (exc.context, exc.problem) if s)
    if mark is None:
        return Problem(name, None, "", f"is not valid YAML: {what}")
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    found = _KEY_VALUE.match(line)
    where = mark.line + 1 + offset
    if found is None:
        return Problem(name, where, "", f"is not valid YAML: {what}")
    key, value = found.group("key"), found.group("value")
    if key not in TEXT_KEYS:  # `sections: [` is a list gone wrong, not text to quote
        return Problem(name, where, "", f"is not valid YAML: {what}")
    colon = found.start("value") - 1
    if "mapping values" in str(exc.problem) and mark.column <= colon:
        return Problem(
            name,
            where,
            key,
            "is indented differently from the lines around it: keys of one mapping start in "
            "the same column",
        )
    if "mapping values" in str(exc.problem) and ": " in value:
        return Problem(
            name,
            where,
            key,
            f'the value has ": " in it, which YAML reads as another key; '
            f"put the whole value in quotes: {key}: {_quoted(value)}",
        )
    start = value[:1]
    if start in "\"'" and value.count(start) > 2:
        inner = value[1:-1] if _is_quoted(value) else value
        return Problem(
            name,
            where,
            key,
            f"the value has {start} inside the {start} around it, which ends it early; "
            f"put it in the other kind of quotes: {key}: {_quoted(inner)}",
        )
    if start in _INDICATORS and not _is_quoted(value):
        return Problem(
            name,
            where,
            key,
            f"the value starts with {start}, which YAML reads as {_INDICATORS[start]}; "
            f"put the whole value in quotes: {key}: {_quoted(value)}",
        )
    return Problem(name, where, "", f"is not valid YAML: {what}")


def _is_quoted(value: str) -> bool:
    return len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"


def _quoted(value: str) -> str:
    if '"' in value and "'" not in value:
        return f"'{value}'"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Index:
    """The line of every value by its field path, plus what YAML lets through silently:
    duplicate keys, and aliases (a few nested ones expand to billions of values)."""

    def __init__(self, name: str, text: str, offset: int) -> None:
        self.name = name
        self.text = text
        self.offset = offset
        self.lines: dict[Loc, int] = {}
        self.scalars: dict[Loc, Scalar] = {}
        self.problems: list[Problem] = []
        self._seen: set[int] = set()

    def walk(self, node: yaml.Node, loc: Loc, line: int) -> None:
        # A value's problem is reported on its key's line, where the editor looks.
        self.lines[loc] = line
        if id(node) in self._seen:
            self._problem(line, loc, "repeats another value with a YAML alias; write it out")
            return
        if len(loc) > MAX_DEPTH and not isinstance(node, yaml.ScalarNode):
            self._problem(line, loc, f"is nested more than {MAX_DEPTH} levels deep")
            return
        if isinstance(node, yaml.ScalarNode):
            self._check_scalar(node, loc, line)
            return
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self._seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1 + self.offset
                if not isinstance(key_node, yaml.ScalarNode):
                    self._problem(key_line, loc, "has a key that is a list or mapping, not a name")
                    continue
                key = str(key_node.value)
                if key in keys:
                    self._problem(key_line, (*loc, key), "is given twice")
                keys.add(key)
                self.walk(value_node, (*loc, key), key_line)
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                # An alias's node carries its anchor's line; the editor wrote it on this one.
                alias = id(child) in self._seen
                child_line = child.start_mark.line + 1 + self.offset
                self.walk(child, (*loc, i), line if alias else child_line)

    def _check_scalar(self, node: yaml.ScalarNode, loc: Loc, line: int) -> None:
        """Build the value as the loader will: YAML's constructors raise bare ValueError and
        worse for `date: 2021-02-30` or `!!int abc`, which would be a traceback."""
        if node.tag == _STR_TAG:
            self._text(node, loc, line)
            return
        construct = _SCALARS.yaml_constructors.get(node.tag)
        if construct is None:
            return  # an unknown tag: the loader reports it with its line
        try:
            construct(_SCALARS, node)
        except Exception as exc:  # whatever it raises, the value is unusable
            if node.tag == _TIMESTAMP_TAG:
                reason = f" ({exc})" if isinstance(exc, ValueError) else ""
                self._problem(
                    line,
                    loc,
                    f"{node.value} is not a real date{reason}; "
                    'fix it, or put it in quotes if it is meant as text: "2021-02-30"',
                )
            else:
                kind = node.tag.rpartition(":")[2]
                self._problem(line, loc, f"{node.value!r} cannot be read as YAML !!{kind}")

    def _text(self, node: yaml.ScalarNode, loc: Loc, line: int) -> None:
        # Refused in the raw text: as Markdown, __NL_NAME__ would become bold "NL_NAME".
        try:
            check_placeholders(str(node.value))
        except ValueError as exc:
            self._problem(line, loc, str(exc))
            return
        first = node.start_mark.line + 1 + self.offset
        if node.style in ("|", ">"):
            first += 1
        literal = None
        if node.style == ">":
            literal = self._as_literal(node)
        self.scalars[loc] = Scalar(first, literal)

    def _as_literal(self, node: yaml.ScalarNode) -> str | None:
        """A folded block's text with its line breaks, or None if it cannot be re-read."""
        source = self.text[node.start_mark.index : node.end_mark.index]
        header, _, body = source.partition("\n")
        if any(ch.isdigit() for ch in header):
            return None  # an explicit indentation indicator is relative to the parent
        lines = body.split("\n")
        indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
        if not indents:
            return None
        # The block's indentation is its first line's (YAML's rule); deeper lines keep the rest.
        indent = indents[0]
        if any(line.strip() and len(line) - len(line.lstrip(" ")) < indent for line in lines):
            return None
        return "\n".join(line[indent:] for line in lines).strip("\n")

    def _problem(self, line: int, loc: Loc, message: str) -> None:
        self.problems.append(Problem(self.name, line, field_name(loc), message))


def field_name(loc: Loc) -> str:
    """`sections[0].items[2].title`: a location as the editor reads it."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# The fields whose text is Markdown; an error inside one is named by the field, at its line.
CONTENT_FIELDS = {"intro", "outro", "summary"}
INLINE_FIELDS = {"title"}


def line_of(lines: dict[Loc, int], loc: Loc) -> int | None:
    """The line of `loc`, else of the nearest enclosing value that has one."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def error_field(loc: Loc) -> str:
    """The path up to the text field an error is in: inside it, the line says where."""
    for index, part in enumerate(loc):
        if part in CONTENT_FIELDS or (part in INLINE_FIELDS and index > 0):
            return field_name(loc[: index + 1])
    return field_name(loc)
