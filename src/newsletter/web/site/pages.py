"""Page names and values in, escaped HTML pages out, in the newsletter's language.

The pages `newsletter serve` and `newsletter build --site` show around the emails themselves: the
archive index, the unsubscribe confirm/done pages, the signup, confirmation and preference pages
and the error pages. They are Jinja templates in
templates/ with autoescape on; every value (titles, addresses, list names) is escaped. The pages
load nothing (no scripts, fonts or images), so a strict Content-Security-Policy holds; each
names the archive's Atom feed in a <link rel="alternate">, and, when a list takes signups, links
the signup page (`add_signup_link` does the same for an issue's page, which is the email).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from newsletter.config.settings import Settings
from newsletter.i18n import PAGES, has_strings, strings_for
from newsletter.links import feed_url, signup_url
from newsletter.rendering.templatecache import page_environment

UI_DIR = Path(__file__).resolve().parent / "templates"

_env = page_environment(UI_DIR)


def render_page(template: str, settings: Settings, **context: Any) -> str:
    """One page in the newsletter's language; `context` values are escaped by the template."""
    language = settings.newsletter.language
    # The page says which language it is in: the newsletter's if we have its words, else English.
    lang = language if has_strings(PAGES, language) else "en"
    return _env.get_template(template).render(
        lang=lang,
        t=strings_for(PAGES, language),
        newsletter_name=settings.newsletter.name,
        feed_href=feed_url(settings.newsletter.base_url),
        signup_href=_signup_href(settings),
        **context,
    )


def _signup_href(settings: Settings) -> str:
    return signup_url(settings.newsletter.base_url) if settings.signup_lists else ""


_BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)


def add_signup_link(page: str, settings: Settings) -> str:
    """An issue's web page with a line that links the signup page at its top (when a list
    takes signups): readers who were forwarded an issue find where to subscribe."""
    href = _signup_href(settings)
    found = _BODY.search(page)
    if not href or found is None:
        return page
    words = strings_for(PAGES, settings.newsletter.language)
    line = (
        '<p id="nl-subscribe" style="margin:0;padding:10px 16px;text-align:center;'
        "font:14px/1.5 -apple-system,BlinkMacSystemFont,'Segoe UI',Arial,sans-serif\">"
        f'<a href="{html.escape(href)}">{html.escape(words["subscribe_link"])}'
        f" · {html.escape(settings.newsletter.name)}</a></p>"
    )
    return page[: found.end()] + line + page[found.end() :]
