"""An Issue -> RenderedEmail (HTML with CSS inlined + plain text), once per issue.

Jinja renders templates/email/issue.mjml to MJML, mjml-python (MRML) compiles it to HTML, and
the project's inline.css is inlined by css-inline (default) or premailer. Per-recipient values
stay as Placeholder words, filled later by message.py without rendering again.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import css_inline
import jinja2
import mjml

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
    # Optional blocks leave runs of blank lines; one blank line is all a reader needs.
    text = re.sub(
        r"\n{3,}", "\n\n", _render_template(env, TEXT_TEMPLATE, _context(issue, settings))
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
    return env


@jinja2.pass_context
def _section_number_filter(ctx: jinja2.runtime.Context, n: int) -> str:
    return section_number(n, str(ctx["lang"]))


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
    return html


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


def preheader_for(issue: Issue) -> str:
    """The inbox preview line: the issue's own, else its first titles."""
    if issue.preheader:
        return issue.preheader
    titles = " · ".join(item.title for section in issue.sections for item in section.items[:2])
    return titles[:140]


def _context(issue: Issue, settings: Settings) -> dict[str, Any]:
    language = settings.newsletter.language
    return {
        "issue": issue,
        "newsletter_name": settings.newsletter.name,
        "lang": language,
        "font_stack": FONT_STACK,
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
