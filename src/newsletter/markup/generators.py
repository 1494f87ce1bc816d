"""Site generators' own tags in Markdown -> markdown-it tokens the readers turn into blocks.

Hugo shortcodes (`{{< youtube ID >}}`, `{{% notice %}}`), Jekyll's and Eleventy's Liquid tags
(`{% highlight swift %}` … `{% endhighlight %}`, `{% include x.html %}`) and their output
expressions (`{{ site.version }}`) are read by two markdown-it rules, one for a line of its own
(a block) and one inside a paragraph, into a `generator` token whose meta holds the tag: its
name, its arguments (positional and `key="…"`, split by shlex as a shell splits words), whether
it closes a pair. A tag ends at the first closing mark outside quotes, as Hugo's own lexer reads
`caption="a >}} b"`. A highlight pair becomes a fenced code block with its lines and
indentation; a comment pair is left out, as the site leaves it; `{% raw %}` and `{% endraw %}`
go, and the lines between are read as any others. `shown` says what a tag stands for on the
site (a video's or a post's page, a figure's image), as data the span reader links and notes.

Text is text (issue 30): inside a paragraph, a Liquid tag that fills in nothing (`{% for x in
xs %}` in a weekly about templates) and an expression that reads no site's data (`{{ .Values
}}`, `{{ msg }}`) are shown as written. Which is which is read by Jinja's parser (Liquid's and
Nunjucks' `{{ … }}` are its syntax), never by a pattern over the text.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, Protocol

import jinja2
from jinja2 import nodes

from newsletter.markup.addresses import expanded

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_block import StateBlock
    from markdown_it.rules_inline import StateInline


class Addresses(Protocol):
    """What a tag's link or image needs of the span reader."""

    def note(self, level: Literal["error", "warning"], code: str, line: int, text: str) -> None:
        """Tell the editor."""

    def link_target(self, href: str, line: int) -> str | None:
        """`href` as an absolute address, or None (noted)."""

    def picture(self, written: str, tag: str, line: int) -> str | None:
        """An image's address resolved, or None (noted)."""


# Each tag's opening and closing marks: Hugo's two shortcode forms, Liquid's tags, then the
# output expressions of Liquid and Nunjucks (after `{{<` and `{{%`, which open with `{{` too).
_MARKS: tuple[tuple[str, str, str], ...] = (
    ("{{<", ">}}", "hugo"),
    ("{{%", "%}}", "hugo"),
    ("{%", "%}", "liquid"),
    ("{{", "}}", "expression"),
)
# Liquid's paired code tags: their lines are code, kept as written.
_CODE_PAIRS = {"highlight": "endhighlight"}
# Liquid's comment: its lines are the editor's, never the reader's.
_DROPPED_PAIRS = {"comment": "endcomment"}
# Liquid tags that only say "read what follows as written": they go, what they hold stays.
_QUIET = frozenset({"raw", "endraw"})
_HUGO_CODE = frozenset({"highlight", "code"})
# Themes' paired callout shortcodes (Relearn's and Docsy's `notice`, Blowfish's `alert`, …):
# `{{% notice tip "Title" %}}` … `{{% /notice %}}` is a callout, as a container is.
_HUGO_CALLOUTS = frozenset({"notice", "callout", "alert", "admonition", "hint"})
# Liquid tags that fill in the site's own files, addresses or embeds (Jekyll plugins' youtube,
# vimeo, tweet, gist) inside running text. Any other tag in a sentence is a weekly writing about
# templates (a lone `{% for %}` would stop the site's own build): it is shown as written.
_INLINE_LIQUID = frozenset({"include", "include_relative", "render", "link", "post_url"})
_INLINE_LIQUID |= {"youtube", "vimeo", "tweet", "twitter", "gist"}
# The data Jekyll and Eleventy give a page's expressions: `{{ site.version }}` reads the site.
_SITE_DATA = frozenset(
    {"site", "page", "layout", "include", "paginator", "jekyll", "eleventy", "collections"}
)


def _closing_mark(text: str, start: int, ending: str) -> int:
    """Where `ending` first stands outside a quoted argument, from `start`; -1 if nowhere."""
    quote = ""
    position = start
    while position < len(text):
        char = text[position]
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char == "\n" and text.startswith("\n\n", position):
            return -1  # a tag never spans a blank line: a quote left open ends it here
        elif text.startswith(ending, position):
            return position
        position += 1
    return -1


def tag_at(text: str, start: int) -> tuple[dict[str, Any], int] | None:
    """The tag that opens at text[start] and the index just after it; None if none does."""
    for opening, ending, family in _MARKS:
        if not text.startswith(opening, start):
            continue
        end = _closing_mark(text, start + len(opening), ending)
        if end == -1:
            end = text.find(ending, start + len(opening))  # a stray quote: its first end
            if end == -1 or "\n\n" in text[start:end]:
                return None
        inner = text[start + len(opening) : end].strip().strip("-").strip()
        shown = text[start : end + len(ending)]
        return _meta(inner, shown, family), end + len(ending)
    return None


def tags_in(text: str) -> Iterator[str | dict[str, Any]]:
    """`text` (an HTML block's words) as runs of text and the tags a sentence may hold (see
    `in_sentence`), in order: `{{< tweet 1 >}}` inside `<center>` is still a post."""
    position = written = 0
    while (position := text.find("{", position)) != -1:
        found = tag_at(text, position)
        if found is None or not in_sentence(found[0]):
            position += 1
            continue
        if position > written:
            yield text[written:position]
        yield found[0]
        written = position = found[1]
    if written < len(text):
        yield text[written:]


def in_sentence(meta: dict[str, Any]) -> bool:
    """Whether a tag inside running text is the site's to fill in (a shortcode, an include, an
    expression of the site's data) rather than words about templates, shown as written."""
    if meta["family"] == "hugo":
        return True
    if meta["family"] == "liquid":
        return meta["name"] in _INLINE_LIQUID
    return bool(meta["data"])


def _meta(inner: str, shown: str, family: str) -> dict[str, Any]:
    if family == "expression":
        return {
            "family": family,
            "name": "",
            "closing": False,
            "args": [],
            "named": {},
            "shown": " ".join(shown.split()),
            "data": _site_data(shown),
        }
    try:
        words = shlex.split(inner)
    except ValueError:  # a quote left open: its words as they stand
        words = inner.split()
    name = words[0] if words else ""
    named: dict[str, str] = {}
    positional: list[str] = []
    for word in words[1:]:
        key, equals, value = word.partition("=")
        if equals and key.isidentifier():
            named[key] = value
        else:
            positional.append(word)
    closing = name.startswith("/")
    return {
        "family": family,
        "name": name.lstrip("/").lower(),
        "closing": closing,
        "args": positional,
        "named": named,
        "shown": " ".join(shown.split()),
    }


@cache
def _site_data(expression: str) -> str:
    """What an output expression stands for on the site: `path` (a known filter on a literal
    path, resolved), `data` (it reads the site's or the page's data), or "" (anything else, as
    `{{ .Values }}` or Vue's `{{ msg }}`, which is shown as written)."""
    if expanded(expression) is not None:
        return "path"
    try:
        body = jinja2.Environment(autoescape=True).parse(expression).body
    except jinja2.TemplateSyntaxError:
        return ""
    for output in body:
        for node in output.find_all(nodes.Name):
            if node.name in _SITE_DATA:
                return "data"
    return ""


def _block_rule(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A line that is one tag alone (a tag may run over lines: `{{< figure` … `>}}`); a code
    pair with the lines between as a fence; a comment pair, `{% raw %}`, left out."""
    if state.sCount[start_line] - state.blkIndent >= 4:
        return False
    begin = state.bMarks[start_line] + state.tShift[start_line]
    found = tag_at(state.src, begin)
    if found is None:
        return False
    meta, after = found
    if meta["family"] == "expression" and not meta["data"]:
        return False  # `{{ msg }}` alone on a line is words, shown as written
    last = start_line
    while last + 1 < end_line and state.eMarks[last] < after:
        last += 1
    if state.src[after : state.eMarks[last]].strip():
        return False  # words follow the tag on its line: a paragraph, read by _inline_rule
    pair_end = _pair_end(state, meta, last, end_line)
    if silent:
        return True
    if pair_end is not None and meta["family"] == "hugo" and meta["name"] in _HUGO_CALLOUTS:
        _callout(state, meta, start_line, last, pair_end)
        return True
    if pair_end is not None and meta["name"] in _DROPPED_PAIRS:
        state.line = pair_end + 1
        return True
    if pair_end is not None:
        token = state.push("fence", "code", 0)
        token.info = meta["args"][0] if meta["args"] else ""
        token.markup = "```"
        lines = state.getLines(last + 1, pair_end, state.sCount[start_line], True)
        # As Jekyll's and Hugo's highlighters show it: without blank lines at either end.
        token.content = "\n".join(_without_blank_ends(lines.split("\n"))) + "\n"
        token.map = [start_line, pair_end + 1]
        state.line = pair_end + 1
        return True
    if meta["family"] != "liquid" or meta["name"] not in _QUIET:
        token = state.push("generator", "", 0)
        token.meta = meta
        token.content = meta["shown"]
        token.map = [start_line, last + 1]
    state.line = last + 1
    return True


def _callout(state: StateBlock, meta: dict[str, Any], start: int, last: int, end: int) -> None:
    """A theme's callout pair as the tokens of a `::: kind Title` container, its lines between
    read as Markdown (the `{{% %}}` form's, and the `{{< >}}` form's that themes render too)."""
    args, named = meta["args"], meta["named"]
    kind = named.get("style") or named.get("type") or (args[0] if args else "") or "note"
    title = named.get("title") or (args[1] if len(args) > 1 else "")
    opening = state.push("container_callout_open", "div", 1)
    opening.info, opening.markup = f"{kind} {title}".strip(), ":::"
    opening.map = [start, end + 1]
    parent, line_max = state.parentType, state.lineMax
    state.parentType, state.lineMax = "container", end
    state.md.block.tokenize(state, last + 1, end)
    state.parentType, state.lineMax = parent, line_max
    state.push("container_callout_close", "div", -1).markup = ":::"
    state.line = end + 1


def _without_blank_ends(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _pair_end(state: StateBlock, meta: dict[str, Any], start: int, end: int) -> int | None:
    """The line that closes a code or comment pair (`{% endhighlight %}`,
    `{{< /highlight >}}`, `{% endcomment %}`) opened on line `start`."""
    if meta["family"] == "liquid":
        wanted = _CODE_PAIRS.get(meta["name"]) or _DROPPED_PAIRS.get(meta["name"])
    elif meta["family"] == "hugo":
        paired = meta["name"] in _HUGO_CODE | _HUGO_CALLOUTS
        wanted = meta["name"] if paired and not meta["closing"] else None
    else:
        wanted = None
    if wanted is None:
        return None
    for line in range(start + 1, end):
        begin = state.bMarks[line] + state.tShift[line]
        found = tag_at(state.src, begin)
        if found is None:
            continue
        inner = found[0]
        if meta["family"] == "liquid" and inner["name"] == wanted:
            return line
        if meta["family"] == "hugo" and inner["closing"] and inner["name"] == wanted:
            return line
    return None


def _inline_rule(state: StateInline, silent: bool) -> bool:
    if state.src[state.pos] != "{":
        return False
    found = tag_at(state.src, state.pos)
    if found is None or found[1] > state.posMax or not in_sentence(found[0]):
        return False  # words about templates, shown as written
    if not silent:
        token = state.push("generator", "", 0)
        token.meta = found[0]
        token.content = found[0]["shown"]
    state.pos = found[1]
    return True


def generator_plugin(md: MarkdownIt) -> None:
    """Read generators' tags: before paragraphs and fences, and inside text."""
    md.block.ruler.before(
        "fence", "generator", _block_rule, {"alt": ["paragraph", "reference", "blockquote"]}
    )
    md.inline.ruler.before("text", "generator", _inline_rule)


def shown(meta: dict[str, Any]) -> dict[str, str]:
    """What a tag stands for: `{"link": url, "label": …}`, `{"image": src, …}`, or `{}` for a
    tag an email has nothing of (an include, an unknown shortcode, a pair's closing tag)."""
    name, args, named = meta["name"], meta["args"], meta["named"]
    first = named.get("id") or (args[0] if args else "")
    title = named.get("title", "")
    if meta["family"] == "liquid":
        return _liquid_embed(name, first)
    if meta["family"] != "hugo" or meta["closing"]:
        return {}
    if name == "youtube" and first:
        return {
            "link": f"https://www.youtube.com/watch?v={first}",
            "label": f"▶ {title or 'video'}",
        }
    if name == "vimeo" and first:
        return {"link": f"https://vimeo.com/{first}", "label": f"▶ {title or 'video'}"}
    if name in ("x", "tweet", "twitter"):
        user = named.get("user", "") or (args[0] if len(args) > 1 else "")
        post = named.get("id") or (args[-1] if args else "")
        if post:
            return {
                "link": f"https://x.com/{user or 'i'}/status/{post}",
                "label": f"post by @{user}" if user else "post",
            }
    if name == "instagram" and first:
        return {"link": f"https://www.instagram.com/p/{first}/", "label": "Instagram post"}
    if name == "gist" and len(args) >= 2:
        return {"link": f"https://gist.github.com/{args[0]}/{args[1]}", "label": f"gist {args[-1]}"}
    if name == "figure" and named.get("src"):
        found = {"image": named["src"], "alt": named.get("alt") or named.get("caption", "")}
        found |= {"href": named.get("link", ""), "caption": named.get("caption") or title}
        return found
    return {}


def _liquid_embed(name: str, first: str) -> dict[str, str]:
    """Jekyll's embed plugins' tags (`{% youtube ID %}`, `{% vimeo ID %}`, `{% gist user/ID %}`,
    `{% tweet https://… %}`) as the page they embed; any other Liquid tag shows nothing."""
    if not first or name not in ("youtube", "vimeo", "gist", "tweet", "twitter"):
        return {}
    if first.startswith(("https://", "http://")):
        label = "▶ video" if name in ("youtube", "vimeo") else "post" if name != "gist" else "gist"
        return {"link": first, "label": label}
    if name == "youtube":
        return {"link": f"https://www.youtube.com/watch?v={first}", "label": "▶ video"}
    if name == "vimeo":
        return {"link": f"https://vimeo.com/{first}", "label": "▶ video"}
    if name == "gist":
        return {"link": f"https://gist.github.com/{first}", "label": f"gist {first.split('/')[-1]}"}
    return {"link": f"https://x.com/i/status/{first}", "label": "post"}


def tag_spans(meta: dict[str, Any], reader: Addresses, line: int) -> list[dict[str, Any]]:
    """A tag as spans: a link to a video or a post, or an image; none, with a warning, for a
    tag an email has nothing of. A pair's closing tag goes quietly: its opening was noted."""
    if meta["family"] == "expression" and meta["data"] == "path":
        return [{"kind": "text", "text": expanded(meta["shown"]) or ""}]  # as the site shows it
    found = shown(meta)
    if "link" in found:
        target = reader.link_target(found["link"], line)
        if target is not None:
            return [
                {"kind": "link", "url": target, "spans": [{"kind": "text", "text": found["label"]}]}
            ]
        return []
    if "image" in found:
        src = reader.picture(found["image"], "{{< figure >}}", line)
        if src is None:
            return []
        image = {"kind": "image", "src": src, "alt": " ".join(found["alt"].split())}
        if found["href"] and (href := reader.link_target(found["href"], line)) is not None:
            image["href"] = href
        if found["caption"]:
            image["caption"] = found["caption"]
        return [image]
    if meta["closing"] or (meta["family"] == "liquid" and meta["name"].startswith("end")):
        return []
    what = {"hugo": "Hugo shortcode", "liquid": "Liquid tag"}.get(meta["family"], "expression")
    reader.note(
        "warning",
        "markup",
        line,
        f"the {what} {meta['shown']} is left out of the email: only the site's own build fills "
        "it in; write what readers need of it in Markdown",
    )
    return []
