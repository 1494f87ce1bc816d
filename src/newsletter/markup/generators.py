"""Site generators' own tags in Markdown -> markdown-it tokens the readers turn into blocks.

Hugo shortcodes (`{{< youtube ID >}}`, `{{% notice %}}`), Jekyll's and Eleventy's Liquid tags
(`{% highlight swift %}` … `{% endhighlight %}`, `{% include x.html %}`) are read by two
markdown-it rules, one for a line of its own (a block) and one inside a paragraph, into a
`generator` token whose meta holds the tag: its name, its arguments (positional and `key="…"`,
split by shlex as a shell splits words), whether it closes a pair. A highlight pair becomes a
fenced code block with its lines and indentation. `shown` says what a tag stands for on the
site (a video's or a post's page, a figure's image), as data the span reader links and notes.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, Literal, Protocol

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


# Each tag's opening and closing marks: Hugo's two shortcode forms, then Liquid's.
_MARKS = (("{{<", ">}}"), ("{{%", "%}}"), ("{%", "%}"))
# Liquid's paired code tags: their lines are code, kept as written.
_CODE_PAIRS = {"highlight": "endhighlight", "raw": "endraw"}
_HUGO_CODE = frozenset({"highlight", "code"})
# Inside a sentence, a Liquid-looking tag is read as one only when a site fills content in with
# it: a weekly about templates writes `{% for x in xs %}` or `{% raw %}` in prose as its subject,
# and Jekyll would never have let such a tag through unescaped (tests/test_markers.py).
_INLINE_LIQUID = frozenset(
    {"include", "include_relative", "link", "post_url", "youtube", "vimeo", "tweet", "gist"}
)


def tag_at(text: str, start: int) -> tuple[dict[str, Any], int] | None:
    """The tag that opens at text[start] and the index just after it; None if none does."""
    for opening, ending in _MARKS:
        if not text.startswith(opening, start):
            continue
        end = text.find(ending, start + len(opening))
        if end == -1:
            return None
        inner = text[start + len(opening) : end].strip().strip("-").strip()
        shown = text[start : end + len(ending)]
        return _meta(inner, shown, "liquid" if opening == "{%" else "hugo"), end + len(ending)
    return None


def _meta(inner: str, shown: str, family: str) -> dict[str, Any]:
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


def _block_rule(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A line that is one tag alone; a code pair with the lines between as a fence."""
    if state.sCount[start_line] - state.blkIndent >= 4:
        return False
    begin = state.bMarks[start_line] + state.tShift[start_line]
    line_end = state.eMarks[start_line]
    found = tag_at(state.src, begin)
    if found is None or state.src[found[1] : line_end].strip():
        return False
    meta, _ = found
    pair_end = _pair_end(state, meta, start_line, end_line)
    if silent:
        return True
    if pair_end is not None:
        token = state.push("fence", "code", 0)
        token.info = meta["args"][0] if meta["args"] else ""
        token.markup = "```"
        token.content = state.getLines(start_line + 1, pair_end, state.sCount[start_line], True)
        token.map = [start_line, pair_end + 1]
        state.line = pair_end + 1
        return True
    token = state.push("generator", "", 0)
    token.meta = meta
    token.content = meta["shown"]
    token.map = [start_line, start_line + 1]
    state.line = start_line + 1
    return True


def _pair_end(state: StateBlock, meta: dict[str, Any], start: int, end: int) -> int | None:
    """The line that closes a code pair (`{% endhighlight %}`, `{{< /highlight >}}`)."""
    if meta["family"] == "liquid":
        wanted = _CODE_PAIRS.get(meta["name"])
    else:
        wanted = meta["name"] if meta["name"] in _HUGO_CODE and not meta["closing"] else None
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
    if found is None or found[1] > state.posMax:
        return False
    if found[0]["family"] == "liquid" and found[0]["name"] not in _INLINE_LIQUID:
        return False
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


def tag_spans(meta: dict[str, Any], reader: Addresses, line: int) -> list[dict[str, Any]]:
    """A tag as spans: a link to a video or a post, or an image; none, with a warning, for a
    tag an email has nothing of. A pair's closing tag goes quietly: its opening was noted."""
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
    what = "Hugo shortcode" if meta["family"] == "hugo" else "Liquid tag"
    reader.note(
        "warning",
        "markup",
        line,
        f"the {what} {meta['shown']} is left out of the email: only the site's own build fills "
        "it in; write what readers need of it in Markdown",
    )
    return []
