"""errors.py's docstring draws the error tree every `except` in the code is written against: it
must be the classes' own tree (a DatabaseError moved out of DeliveryError, the drawing left it
in, and a reader catching DeliveryError for a database fault would miss every one)."""

from __future__ import annotations

import re

import pytest

from newsletter import errors

_NODE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z]\w+Error)\b")


def drawn_tree() -> dict[str, str | None]:
    """Each class the docstring draws -> the class it is drawn under (None: the root)."""
    assert errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        found = _NODE.match(line[4:]) if line.startswith("    ") else None
        if found is None:
            continue
        depth = len(found.group("indent"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[found.group("name")] = stack[-1][1] if stack else None
        stack.append((depth, found.group("name")))
    return parents


@pytest.mark.slow
def test_the_drawn_tree_is_the_classes_tree() -> None:
    classes = {
        name: value
        for name in errors.__all__
        if isinstance(value := getattr(errors, name), type) and issubclass(value, Exception)
    }
    actual = {
        name: (None if value is errors.NewsletterError else value.__bases__[0].__name__)
        for name, value in classes.items()
    }
    assert drawn_tree() == actual
