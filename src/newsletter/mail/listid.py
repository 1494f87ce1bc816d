"""A list's configured id, its name and the sender's domain in; its List-Id (RFC 2919) out.

The one rule for the issue's mail (message.py) and the site's (sitemail.py): `lists.NAME.id`,
else NAME.DOMAIN, a dot-atom with a dot in it; anything else is the config's error, named.
"""

from __future__ import annotations

from newsletter.errors import ConfigError
from newsletter.importers.subscribers import DOT_ATOM


def list_id(configured: str, list_name: str, domain: str) -> str:
    """The List-Id of `list_name`, or a ConfigError naming the key and the fix."""
    found = configured or f"{list_name}.{domain}"
    if not DOT_ATOM.fullmatch(found) or "." not in found:
        raise ConfigError(
            f"lists.{list_name}.id: {found!r} is not a valid List-Id",
            hint="Use a domain-like name you control, e.g. weekly.news.example.org.",
        )
    return found
