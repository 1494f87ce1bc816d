"""newsletter: an issue file in git -> responsive email -> every subscriber exactly once.

The library's names are imported on first use, so the command line (which needs few of them)
starts fast: `from newsletter import Project` loads what a project needs then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from newsletter.api import Project
    from newsletter.errors import CheckFailedError, NewsletterError
    from newsletter.gate import SendVerdict
    from newsletter.send.pipeline import Listener, SendOutcome, SendRequest

__version__ = "0.1.0"
__all__ = [
    "CheckFailedError",
    "Listener",
    "NewsletterError",
    "Project",
    "SendOutcome",
    "SendRequest",
    "SendVerdict",
    "__version__",
]
_HOMES = {
    "CheckFailedError": "newsletter.errors",
    "Listener": "newsletter.send.pipeline",
    "NewsletterError": "newsletter.errors",
    "Project": "newsletter.api",
    "SendOutcome": "newsletter.send.pipeline",
    "SendRequest": "newsletter.send.pipeline",
    "SendVerdict": "newsletter.gate",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'newsletter' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    # The lazy names are no module attributes until used: without this, dir() and a REPL's or
    # an editor's completion would not offer the public API at all.
    return sorted({*globals(), *__all__})
