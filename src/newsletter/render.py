"""An Issue -> RenderedEmail (HTML with CSS inlined + plain text), once per issue.

Jinja renders templates/email/issue.mjml to MJML, mjml-python (MRML) compiles it to HTML, and
the project's inline.css is inlined by css-inline (default) or premailer. Per-recipient values
stay as Placeholder words, filled later by message.py without rendering again.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from functools import cache
from html import escape as html_escape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import css_inline
import jinja2
import mjml
from markupsafe import Markup

from newsletter.errors import TemplateError, display_path
from newsletter.i18n import EMAIL, strings_for
from newsletter.markup import to_html, to_text
from newsletter.models import Issue, Placeholder, RenderedEmail
from newsletter.settings import Settings

HTML_TEMPLATE = "issue.mjml"
TEXT_TEMPLATE = "issue.txt"
INLINE_CSS = "inline.css"

FONT_STACK = (
    "-apple-system, BlinkMacSystemFont, 'Segoe UI', 'PingFang SC', 'Hiragino Sans GB', "
    "'Microsoft YaHei', 'Noto Sans CJK SC', 'Source Han Sans SC', 'Helvetica Neue', "
    "Arial, sans-serif"
)
# Outlook desktop (Word) uses the first family only: one it has, that also covers Chinese.
MSO_FONT_STACK = Markup("'Microsoft YaHei', 'Segoe UI', Arial, sans-serif")
PREHEADER_LIMIT = 140
_CJK_DIGITS = "零一二三四五六七八九"

# Shipped defaults: the wheel carries templates/email/ as newsletter/default_templates/email;
# a source checkout uses the repo's own folder.
_PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_TEMPLATE_DIRS = (
    _PACKAGE_DIR / "default_templates" / "email",
    _PACKAGE_DIR.parents[1] / "templates" / "email",
)


def render_issue(issue: Issue, settings: Settings) -> RenderedEmail:
    """Render both parts of `issue`; raise TemplateError naming the template and line on failure."""
    html, css = compile_issue(issue, settings)
    html = inline_css(html, css, settings.render.inliner)
    env = template_environment(settings.templates_dir)
    # Optional blocks leave runs of blank lines; two (between sections) is the most a reader
    # needs.
    text = re.sub(
        r"\n{4,}", "\n\n\n", _render_template(env, TEXT_TEMPLATE, _context(issue, settings))
    )
    return RenderedEmail(issue_number=issue.number, subject=issue.title, html=html, text=text)


def compile_issue(issue: Issue, settings: Settings) -> tuple[str, str]:
    """The HTML part before inlining, and the CSS to inline into it."""
    env = template_environment(settings.templates_dir)
    html = compile_mjml(_render_template(env, HTML_TEMPLATE, _context(issue, settings)))
    # Comments would ride along into the <style> block premailer adds for its css_text.
    css = re.sub(r"/\*.*?\*/", "", _source(env, INLINE_CSS), flags=re.DOTALL)
    return html, css


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
    )
    env.filters["markdown"] = to_html
    env.filters["markdown_text"] = to_text
    env.filters["section_number"] = _section_number_filter
    env.filters["long_date"] = _long_date_filter
    env.filters["site"] = site_name
    return env


@jinja2.pass_context
def _section_number_filter(ctx: jinja2.runtime.Context, n: int) -> str:
    return section_number(n, str(ctx["lang"]))


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


def compile_mjml(source: str) -> str:
    try:
        # fonts={}: MJML's default links Google Fonts, which many of our readers cannot reach.
        html: str = mjml.mjml2html(source, disable_comments=True, fonts={})
    except ValueError as exc:
        where = _locate_xml_error(source)
        raise TemplateError(
            f"{HTML_TEMPLATE}: MJML could not compile the output: {exc}{where}",
            hint="MJML is strict XML inside mj-text: close every tag, quote every attribute, "
            "write < as &lt;. `newsletter preview` shows the result as you save.",
        ) from None
    return _unescape_aria_label(html)


# MRML writes mj-title into the body's aria-label with Rust's escape_debug: Thai vowel signs,
# U+200B and U+202E come out as the literal text `\u{e31}`, a quote as `\"`.
_ARIA_LABEL = re.compile(r'aria-label="((?:[^"\\]|\\.)*)" aria-roledescription="email"')
_RUST_ESCAPE = re.compile(r"\\(?:u\{([0-9a-fA-F]{1,6})\}|(.))")
_RUST_CHARS = {"n": "\n", "r": "\r", "t": "\t", "0": "\0"}


def _unescape_aria_label(html: str) -> str:
    def character(match: re.Match[str]) -> str:
        code, char = match.groups()
        value = chr(int(code, 16)) if code else _RUST_CHARS.get(char, char)
        return html_escape(value)

    def label(match: re.Match[str]) -> str:
        text = _RUST_ESCAPE.sub(character, match.group(1))
        return f'aria-label="{text}" aria-roledescription="email"'

    return _ARIA_LABEL.sub(label, html)


def _locate_xml_error(source: str) -> str:
    """MRML's errors carry no position; an XML parser finds the first one in the Jinja output."""
    try:
        # The project's own template output, and only parsed to point at an error.
        ElementTree.fromstring(source)  # noqa: S314
    except ElementTree.ParseError as exc:
        line, column = exc.position
        text = source.splitlines()[line - 1].strip() if line <= len(source.splitlines()) else ""
        return f" (line {line}, column {column} of the generated MJML: {text[:120]!r})"
    return ""


def inline_css(html: str, css: str, inliner: str) -> str:
    """Inline `css` into style attributes, keeping every <style> block (and its @media rules)."""
    if inliner == "premailer":
        return _inline_with_premailer(html, css)
    engine = css_inline.CSSInliner(
        inline_style_tags=False,
        keep_style_tags=True,
        keep_link_tags=True,
        load_remote_stylesheets=False,
        extra_css=css,
    )
    result: str = engine.inline(html)
    return result


_STYLE_OPEN = re.compile(r"<style\b", re.IGNORECASE)
_IGNORE = '<style data-premailer="ignore"'


def _inline_with_premailer(html: str, css: str) -> str:
    import premailer  # imported here: slow to import and only used when configured

    # cssutils logs a warning for every mso- property in MJML's CSS.
    logging.getLogger("CSSUTILS").setLevel(logging.CRITICAL)
    doctype = html[: html.index(">") + 1] if html.lstrip().lower().startswith("<!doctype") else ""
    marked = _STYLE_OPEN.sub(_IGNORE, html)
    out: str = premailer.Premailer(
        marked,
        css_text=css,
        keep_style_tags=True,
        strip_important=False,
        allow_network=False,
        disable_validation=True,
        cssutils_logging_level=logging.CRITICAL,
    ).transform()
    out = out.replace(_IGNORE, "<style")
    # premailer drops MJML's lowercase doctype (premailer#156).
    if doctype and not out.lstrip().lower().startswith("<!doctype"):
        out = f"{doctype}\n{out}"
    return out


def section_number(n: int, language: str) -> str:
    """1 -> "一、" in Chinese, "1. " otherwise (the seed numbers sections 一、二、…)."""
    if not language.lower().startswith("zh"):
        return f"{n}. "
    if n < 10:
        return f"{_CJK_DIGITS[n]}、"
    tens, ones = divmod(n, 10)
    word = ("" if tens == 1 else _CJK_DIGITS[tens]) + "十" + (_CJK_DIGITS[ones] if ones else "")
    return f"{word}、"


def dated(issue: Issue, first_sent: dt.date | None) -> Issue:
    """The issue with the date readers see: its own `date:`, else the day it first went out to
    subscribers (`first_sent`; a send that is about to go out passes today)."""
    if issue.date is not None or first_sent is None:
        return issue
    return issue.model_copy(update={"date": first_sent})


def preheader_for(issue: Issue) -> str:
    """The inbox preview line: the issue's own, else the first two titles of each section, as
    many whole titles as fit in PREHEADER_LIMIT characters, with "…" when some were left out."""
    if issue.preheader:
        return issue.preheader
    titles = [item.title for section in issue.sections for item in section.items[:2]]
    line = ""
    for count, title in enumerate(titles, start=1):
        longer = f"{line} · {title}" if line else title
        more = " · …" if count < len(titles) else ""
        if len(longer) + len(more) > PREHEADER_LIMIT:
            # Not even the first title fits: cut it at the limit rather than show nothing.
            return f"{line} · …" if line else f"{title[: PREHEADER_LIMIT - 1]}…"
        line = longer
    return line


def _context(issue: Issue, settings: Settings) -> dict[str, Any]:
    language = settings.newsletter.language
    return {
        "issue": issue,
        "newsletter_name": settings.newsletter.name,
        "lang": language,
        "font_stack": FONT_STACK,
        "mso_font_stack": MSO_FONT_STACK,
        "preheader": preheader_for(issue),
        "text": strings_for(EMAIL, language, name=settings.newsletter.name),
        "placeholders": {
            "name": Placeholder.NAME.value,
            "unsubscribe_url": Placeholder.UNSUBSCRIBE_URL.value,
            "web_url": Placeholder.WEB_URL.value,
        },
    }


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
