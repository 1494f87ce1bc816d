"""`diff` and `shots`: an issue at two git revisions, compared as its readers get it, and its
screenshots (pictures.py, needing the `shots` extra)."""

from newsletter.review.compare import (
    SENT,
    IssueDiff,
    LinkChange,
    Version,
    compare,
    sent_version,
    version_at,
)

__all__ = ["SENT", "IssueDiff", "LinkChange", "Version", "compare", "sent_version", "version_at"]
