"""A Markdown body read in pieces (markup/document.py) gives the very tokens of one whole parse:
cut only where CommonMark starts afresh, and reference links resolved across pieces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from newsletter.markup import parser
from newsletter.markup.document import cut, parse_document

WEEKLIES = Path(__file__).parent / "data" / "weeklies"
TRICKY = """\
Intro with a [reference][later] and a [second][Second].

## One

<div>
## not a heading: still the HTML block
</div>

<!--

## inside a comment

-->

```markdown
## inside a fence

## still inside
```

<pre>

## inside raw pre

</pre>

Setext heading
--------------

## Two
text right after
## Three without a blank line before

[later]: https://e.org/later "Later"
[second]: https://e.org/second
[Second]: https://e.org/ignored-second-definition
"""


def flat(tokens: list[Any], shift: int = 0) -> list[tuple[Any, ...]]:
    out = []
    for token in tokens:
        # Where a block starts (a last block's end may count the blank lines after it or not).
        where = token.map[0] + shift if token.map else None
        children = [
            (c.type, c.content, tuple(sorted((c.attrs or {}).items())))
            for c in token.children or []
        ]
        out.append((token.type, token.tag, token.content, where, token.level, children))
    return out


def pieces_flat(text: str) -> list[tuple[Any, ...]]:
    return [t for start, tokens in parse_document(text) for t in flat(tokens, start)]


@pytest.mark.parametrize(
    "text",
    [
        TRICKY,
        (WEEKLIES / "en" / "580.md").read_text(encoding="utf-8").split("---\n", 2)[2],
        (WEEKLIES / "zh" / "21.md").read_text(encoding="utf-8").split("---\n", 2)[2],
    ],
    ids=["tricky", "english", "chinese"],
)
def test_pieces_parse_as_the_whole(text: str) -> None:
    assert pieces_flat(text) == flat(parser().parse(text))


def test_the_cuts_fall_only_before_headings_that_start_afresh() -> None:
    starts = [text.split("\n", 1)[0] for _, text in cut(TRICKY)]
    assert starts == ["Intro with a [reference][later] and a [second][Second].", "## One", "## Two"]


def test_a_reference_defined_in_a_later_piece_serves_an_earlier_one() -> None:
    [(_, first), *_] = parse_document(TRICKY)
    links = [c.attrs.get("href") for c in first[1].children or [] if c.type == "link_open"]
    assert links == ["https://e.org/later", "https://e.org/second"]


def test_a_save_parses_only_the_piece_it_changed() -> None:
    text = TRICKY.replace("text right after", "text right after, once")
    before = parse_document(TRICKY)
    after = parse_document(text)
    # The same token lists (remembered), but for the piece that changed.
    assert [a is b for (_, a), (_, b) in zip(before, after, strict=True)] == [True, True, False]
