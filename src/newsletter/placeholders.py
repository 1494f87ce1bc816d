"""Text the editor wrote in; a refusal out when it holds a word filled per reader.

The rendered issue keeps `__NL_NAME__`, `__NL_UNSUBSCRIBE_URL__`, … where each reader's message
gets their own values (models.Placeholder). The same word written by the editor, in an issue file
or in newsletter.toml, would be filled too: a link carrying one would send each reader's
unsubscribe link or name to another site.
"""

from __future__ import annotations

import re

# The start of every placeholder word.
PLACEHOLDER_PREFIX = "__NL_"
_PLACEHOLDER_WORD = re.compile(re.escape(PLACEHOLDER_PREFIX) + r"\w*")


def check_placeholders(value: str) -> str:
    """`value`, or ValueError naming the placeholder word it holds."""
    found = _PLACEHOLDER_WORD.search(value)
    if found:
        raise ValueError(
            f"contains {found.group()}: words starting with {PLACEHOLDER_PREFIX} are filled in "
            "per reader (with their name or unsubscribe link); remove it"
        )
    return value
