"""`newsletter diff`: an issue at two git revisions, compared as its readers get it."""

from newsletter.review.compare import IssueDiff, LinkChange, Version, compare

__all__ = ["IssueDiff", "LinkChange", "Version", "compare"]
