"""An Issue -> RenderedEmail (HTML with CSS inlined + plain text), once per issue.

Jinja renders templates/email/issue.mjml (its content blocks from content.mjml) to MJML, and
htmlpart.py compiles and inlines it. An issue past Gmail's clip is cut between sections, items
or an item's blocks (clip.py): the email ends with a link to the rest on its web page (which
renders `whole`); the text part is always whole. Per-recipient values stay as Placeholder
words, filled later by message.py without rendering again.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
from markupsafe import Markup

from newsletter.config.settings import Settings
from newsletter.content import Anchor, Image, Inline, content_text, inline_html, inline_text
from newsletter.errors import TemplateError, display_path
from newsletter.i18n import EMAIL, FONT_STACKS, strings_for
from newsletter.models import Issue, Item, Placeholder, RenderedEmail
from newsletter.rendering import clip
from newsletter.rendering.htmlpart import HTML_TEMPLATE, compile_mjml, inline_css
from newsletter.rendering.labels import greeting_line, item_number, numbering_style, section_number
from newsletter.rendering.templatecache import COMPILED_TEMPLATES

TEXT_TEMPLATE = "issue.txt"
INLINE_CSS = "inline.css"

PREHEADER_LIMIT = 140
# The card is 600 px wide with 28 px on either side: no image is shown wider.
CONTENT_WIDTH = 544
# The words of the "the rest is online" notice, to estimate its size before it is rendered.
_NOTICE_BYTES = 900

# Shipped defaults: the wheel carries templates/email/ as newsletter/default_templates/email;
# a source checkout uses the repo's own folder.
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
DEFAULT_TEMPLATE_DIRS = (
    _PACKAGE_DIR / "default_templates" / "email",
    _PACKAGE_DIR.parents[1] / "templates" / "email",
)


def render_issue(
    issue: Issue, settings: Settings, *, whole: bool = False, budget: int = clip.CUT_AT
) -> RenderedEmail:
    """Render both parts of `issue`; raise TemplateError naming the template and line on failure.

    An HTML part past the clip (`budget`, clip.CUT_AT unless the links will grow: tracked
    links, mail/tracking.py) keeps all that fits and links to the rest online, unless
    `whole` (the web version has it all)."""
    env = template_environment(settings.templates_dir)
    context = _context(issue, settings)
    # Optional blocks leave runs of blank lines; two (between sections) is the most a reader
    # needs.
    text = re.sub(r"\n{4,}", "\n\n\n", _render_template(env, TEXT_TEMPLATE, context))
    html = _html(env, context, settings)
    size = clip.wire_size(html)
    measure = size > min(clip.MEASURE_FROM, budget)
    sizes = clip.section_sizes(html, len(issue.sections), size) if measure else []
    cut = None
    if not whole and size > budget and sizes:
        html, cut = _cut(env, issue, settings, size, sizes, budget)
    return RenderedEmail(
        issue_number=issue.number,
        subject=issue.title,
        html=html,
        text=text,
        section_sizes=tuple(sizes),
        whole_size=size,
        online_from=None if cut is None else cut[0],
        cut=cut,
    )


def _cut(
    env: jinja2.Environment,
    issue: Issue,
    settings: Settings,
    size: int,
    sizes: list[int],
    budget: int,
) -> tuple[str, clip.Cut]:
    """The HTML part with all of `issue` that fits in `budget`, and where it was cut: between
    sections, items or an item's blocks. The measured sections say in which one the cut lands;
    a binary search over that one's pieces finds it (the rest if the estimate was off)."""
    notice = _NOTICE_BYTES + sum(len(str(s.title).encode()) * 2 for s in issue.sections)
    kept = min(clip.sections_that_fit(size, sizes, notice, budget), len(issue.sections) - 1)
    places = clip.pieces(issue) or [(0, -1, 0)]
    first = {section: n for n, (section, _, _) in reversed(list(enumerate(places)))}
    guess = (first.get(kept, 0), first.get(kept + 1, len(places)))
    parts: dict[int, str] = {}

    def fits(n: int) -> bool:
        parts[n] = _html(env, _context(issue, settings, places[n]), settings)
        return clip.wire_size(parts[n]) <= budget

    n = clip.last_that_fits(fits, len(places), guess)
    if n <= 0:  # nothing of any section fits (too big even so: `check` says so)
        return parts[0], clip.NOTHING
    return parts[n], places[n]


def render_parts(settings: Settings, name: str, context: dict[str, Any]) -> tuple[str, str]:
    """Templates NAME.txt and NAME.mjml (the site's own mail: confirm, welcome, change) with
    `context` -> (text, HTML with the CSS inlined), by the same pipeline as an issue."""
    env = template_environment(settings.templates_dir)
    text = re.sub(r"\n{3,}", "\n\n", _render_template(env, f"{name}.txt", context))
    html = compile_mjml(_render_template(env, f"{name}.mjml", context))
    return text, inline_css(html, _css(env), settings.render.inliner)


def _html(env: jinja2.Environment, context: dict[str, Any], settings: Settings) -> str:
    html = compile_mjml(_render_template(env, HTML_TEMPLATE, context))
    return inline_css(html, _css(env), settings.render.inliner)


def _css(env: jinja2.Environment) -> str:
    return _without_comments(_source(env, INLINE_CSS))


@lru_cache(maxsize=8)
def _without_comments(css: str) -> str:
    # Comments would ride along into the <style> block premailer adds for its css_text.
    return re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)


@cache
def template_environment(project_dir: Path) -> jinja2.Environment:
    """One Environment per templates folder: the project's first, then the shipped defaults."""
    dirs = [project_dir, *(d for d in DEFAULT_TEMPLATE_DIRS if d.is_dir() and d != project_dir)]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
        # Only the plain-text part is exempt: escaping would put "&amp;" in front of readers.
        autoescape=jinja2.select_autoescape(
            disabled_extensions=("txt",), default_for_string=True, default=True
        ),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=True,
        bytecode_cache=COMPILED_TEMPLATES,
    )
    env.filters["inline"] = inline_html
    env.filters["inline_text"] = inline_text
    env.filters["unlinked"] = unlinked_html
    env.filters["long_date"] = _long_date_filter
    env.filters["site"] = site_name
    env.filters["quote_lines"] = quote_lines
    env.filters["compact_css"] = compact_css
    return env


@jinja2.pass_context
def _long_date_filter(ctx: jinja2.runtime.Context, day: dt.date) -> str:
    return long_date(day, str(ctx["text"]["date_format"]))


def long_date(day: dt.date, date_format: str) -> str:
    """A date as readers write it: "2021年11月1日", "November 1, 2021" (no locale needed)."""
    return date_format.format(year=day.year, month=day.month, day=day.day, month_name=f"{day:%B}")


def site_name(url: str) -> str:
    """The site a link goes to, as its text shows it: "arxiv.org" for https://www.arxiv.org/…"""
    host = urlsplit(url).hostname or url
    return host.removeprefix("www.")


@lru_cache(maxsize=32)
def compact_css(css: str) -> str:
    """A style sheet without the spaces no client needs: the head is every message's fixed
    cost."""
    css = re.sub(r"\s+", " ", re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL))
    css = re.sub(r"\s*([{};,>])\s*", r"\1", css)
    css = re.sub(r":\s+", ":", css)
    return re.sub(r"\s*!important", "!important", css).replace(";}", "}").strip()


def unlinked_html(value: Inline) -> Markup:
    """A title's spans as HTML with the <a> of its links left out, their text kept: the whole
    title is then one link (an <a> inside another is not HTML)."""
    return inline_html(_unlinked(value.spans))


def _unlinked(spans: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for span in spans:
        if isinstance(span, Anchor):
            out += _unlinked(span.spans)
        elif isinstance(getattr(span, "spans", None), tuple):  # bold, italic, … around a link
            out.append(span.model_copy(update={"spans": tuple(_unlinked(span.spans))}))
        else:
            out.append(span)
    return out


def quote_lines(text: str, prefix: str = "> ") -> str:
    """Each line of `text` behind `prefix` (a quote in the plain-text part)."""
    return "\n".join(f"{prefix}{line}".rstrip() for line in text.split("\n"))


@dataclass(frozen=True)
class ItemGroup:
    """Items as the templates lay them out: a compact list of title-only items, or full ones."""

    compact: bool
    entries: list[tuple[Item, str]]  # each item with its number label


def item_groups(items: Iterable[Item], language: str, style: str) -> list[ItemGroup]:
    groups: list[ItemGroup] = []
    titled = 0
    for item in items:
        label = ""
        if item.title is not None:
            label = item_number(titled, language, style)
            titled += 1
        if groups and groups[-1].compact and item.compact:
            groups[-1].entries.append((item, label))
        else:
            groups.append(ItemGroup(item.compact, [(item, label)]))
    return groups


def shown_size(image: Image) -> tuple[int, int] | None:
    """The size the email shows `image` at (the column's width at most), if it is known."""
    if not image.width or not image.height:
        return None
    width = min(image.width, CONTENT_WIDTH)
    return width, max(1, round(image.height * width / image.width))


def image_url(image: Image, base_url: str) -> str:
    """An https image as it is; a file under issues/ where `newsletter serve` publishes it."""
    if not image.local:
        return image.src
    return f"{base_url.rstrip('/')}/issues/{quote(image.src)}"


def dated(issue: Issue, first_sent: dt.date | None) -> Issue:
    """The issue with the date readers see: its own `date:`, else the day it first went out to
    subscribers (`first_sent`; a send that is about to go out passes today)."""
    if issue.date is not None or first_sent is None:
        return issue
    return issue.model_copy(update={"date": first_sent})


def preheader_for(issue: Issue) -> str:
    """The inbox preview line: the issue's own, else the first two titles of each section, as
    many whole titles as fit in PREHEADER_LIMIT characters, with "…" when some were left out
    (no titles: the section titles, else the intro's first words)."""
    if issue.preheader:
        return issue.preheader
    titles = [
        item.title.text
        for section in issue.sections
        for item in [i for i in section.items if i.title is not None][:2]
        if item.title is not None
    ]
    titles = titles or [section.title.text for section in issue.sections]
    if not titles:
        intro = content_text(issue.intro)
        return intro if len(intro) <= PREHEADER_LIMIT else f"{intro[: PREHEADER_LIMIT - 1]}…"
    line = ""
    for count, title in enumerate(titles, start=1):
        longer = f"{line} · {title}" if line else title
        more = " · …" if count < len(titles) else ""
        if len(longer) + len(more) > PREHEADER_LIMIT:
            # Not even the first title fits: cut it at the limit rather than show nothing.
            return f"{line} · …" if line else f"{title[: PREHEADER_LIMIT - 1]}…"
        line = longer
    return line


def _context(issue: Issue, settings: Settings, cut: clip.Cut | None = None) -> dict[str, Any]:
    language = settings.newsletter.language
    style = numbering_style(settings, issue)
    base_url = settings.newsletter.base_url
    sections = issue.sections if cut is None else clip.kept_part(issue, cut).sections
    return {
        "issue": issue,
        "sections": [
            (
                n,
                section,
                section_number(n, language, style),
                item_groups(section.items, language, style),
            )
            for n, section in enumerate(sections, start=1)
        ],
        "online": [
            (n, section, section_number(n, language, style))
            for n, section in enumerate(issue.sections, start=1)
            if cut is not None and n > cut[0]
        ],
        "newsletter_name": settings.newsletter.name,
        **_script(issue.language or language),
        "preheader": preheader_for(issue),
        # The greeting rides in `text` as the templates have always read it.
        "text": {
            **strings_for(EMAIL, language, name=settings.newsletter.name),
            "greeting": greeting_line(issue, settings),
        },
        "image_size": shown_size,
        "image_url": lambda image: image_url(image, base_url),
        "placeholders": {
            "name": Placeholder.NAME.value,
            "unsubscribe_url": Placeholder.UNSUBSCRIBE_URL.value,
            "web_url": Placeholder.WEB_URL.value,
        },
    }


def _script(language: str) -> dict[str, Any]:
    """`lang` and the font stacks, by the issue's own language (its front matter) where it has
    one; the email's words and numbering stay the newsletter's."""
    stacks = strings_for(FONT_STACKS, language)
    outlook = Markup(stacks["outlook"])  # noqa: S704 (the project's own table)
    return {"lang": language, "font_stack": stacks["all"], "mso_font_stack": outlook}


def _render_template(env: jinja2.Environment, name: str, context: dict[str, Any]) -> str:
    try:
        return env.get_template(name).render(context)
    except jinja2.TemplateSyntaxError as exc:
        where = f"{display_path(exc.filename) if exc.filename else exc.name}:{exc.lineno}"
        raise TemplateError(f"{where}: {exc.message}") from None
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(
            f"template {exc.name} not found in {env.loader.searchpath}",  # type: ignore[union-attr]
            hint="Restore it in templates/email/ or delete the folder to use the shipped defaults.",
        ) from None
    except jinja2.TemplateError as exc:
        filename = env.get_template(name).filename or name
        raise TemplateError(f"{display_path(filename)}:{_template_line(exc)}: {exc}") from None


def _template_line(exc: BaseException) -> str:
    tb = exc.__traceback__
    line = "?"
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith((".mjml", ".txt")):
            line = str(tb.tb_lineno)
        tb = tb.tb_next
    return line


def _source(env: jinja2.Environment, name: str) -> str:
    assert env.loader is not None
    try:
        source, _, _ = env.loader.get_source(env, name)
    except jinja2.TemplateNotFound:
        return ""
    return source
