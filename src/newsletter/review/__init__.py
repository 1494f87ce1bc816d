"""`diff` and `shots`: an issue at two git revisions, compared as its readers get it, and its
screenshots (pictures.py, needing the `shots` extra)."""

from newsletter.review.compare import IssueDiff, LinkChange, Version, compare, version_at

__all__ = ["IssueDiff", "LinkChange", "Version", "compare", "version_at"]
