"""The rules every text and URL of an issue passes: a value in; the same value, or a ValueError
saying what is wrong and how to fix it, out.

Kept exactly as written when good (a URL is never normalised). Used by the models' validators
and by the YAML reader, which checks placeholder words in the raw text.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# The list a command means when none is named (here, not in settings, so that every command's
# options can name it without loading the config's models: `newsletter --version` needs none).
DEFAULT_LIST = "main"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SPACE = re.compile(r"\s")
# The start of every Placeholder word. In an issue's own text such a word would be filled per
# reader: a link could carry each reader's unsubscribe URL and name to another site.
PLACEHOLDER_PREFIX = "__NL_"
_PLACEHOLDER_WORD = re.compile(re.escape(PLACEHOLDER_PREFIX) + r"\w*")
# A file under issues/, named the way URLs need no escaping: images/cover-1.png
_LOCAL_IMAGE = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9._-]*/)*[A-Za-z0-9_][A-Za-z0-9._-]*")
IMAGE_TYPES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def check_placeholders(value: str) -> str:
    found = _PLACEHOLDER_WORD.search(value)
    if found:
        raise ValueError(
            f"contains {found.group()}: words starting with {PLACEHOLDER_PREFIX} are filled in "
            "per reader (with their name or unsubscribe link); remove it"
        )
    return value


def check_url(value: str) -> str:
    """An absolute http(s) URL with a host and no whitespace; kept exactly as written."""
    check_placeholders(value)
    if _SPACE.search(value) or _CONTROL.search(value):
        raise ValueError("must not contain spaces or control characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an absolute http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("has no host name")
    return value


def check_link_target(value: str) -> str:
    """What a link in running text may point at: an http(s) URL, or mailto: an address."""
    if value.startswith("mailto:"):
        check_placeholders(value)
        if len(value) == len("mailto:") or _CONTROL.search(value) or " " in value:
            raise ValueError(f"{value!r} is not a mailto: address")
        return value
    return check_url(value)


def check_image_source(value: str) -> str:
    """An https URL, or the path of an image file under issues/ (`images/cover.png`)."""
    if "://" in value or value.startswith(("http:", "https:", "/", "data:")):
        check_url(value)
        if not value.startswith("https://"):
            raise ValueError(
                f"{value} must be an https:// URL (mail clients block or warn about others)"
            )
        return value
    if ".." in value.split("/") or not _LOCAL_IMAGE.fullmatch(value):
        raise ValueError(
            f"{value!r} must be an https:// URL or a file under issues/ named with letters, "
            "digits, '-', '_' and '.' (like images/cover.png)"
        )
    if not value.lower().endswith(IMAGE_TYPES):
        raise ValueError(f"{value!r} must be a PNG, JPEG, GIF or WebP file")
    return value


def check_text(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return check_placeholders(value)
