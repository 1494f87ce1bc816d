"""Page names and values in, escaped HTML pages out, in the newsletter's language.

The pages `newsletter serve` and `newsletter build --site` show around the emails themselves: the
archive index, the unsubscribe confirm/done pages and the error pages. They are Jinja templates in
templates/ with autoescape on; every value (titles, addresses, list names) is escaped. The pages
load nothing (no scripts, fonts or images), so a strict Content-Security-Policy holds; each
names the archive's Atom feed in a <link rel="alternate">.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from newsletter.i18n import PAGES, has_strings, strings_for
from newsletter.links import feed_url
from newsletter.settings import Settings
from newsletter.web.listen import page_environment

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
        **context,
    )
