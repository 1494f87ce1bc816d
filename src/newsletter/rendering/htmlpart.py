"""Jinja's MJML output in; the HTML part with the project's CSS inlined out.

mjml-python (MRML) compiles the MJML; css-inline (the default) or premailer inlines inline.css
into style attributes, keeping every <style> block and its @media rules for the clients that read
them. A compile error names the line of the generated MJML, since MRML names none.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from html import escape as html_escape
from xml.etree import ElementTree

import css_inline
import mjml

from newsletter.errors import TemplateError

HTML_TEMPLATE = "issue.mjml"


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
    result: str = _inliner(css).inline(html)
    return result


@lru_cache(maxsize=8)
def _inliner(css: str) -> css_inline.CSSInliner:
    # minify_css: `margin:0` rather than `margin: 0;`, on every styled element of the issue.
    return css_inline.CSSInliner(
        inline_style_tags=False,
        keep_style_tags=True,
        keep_link_tags=True,
        load_remote_stylesheets=False,
        extra_css=css,
        minify_css=True,
    )


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
