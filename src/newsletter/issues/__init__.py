"""Issue files in (issues/N.yaml or issues/N.md); validated Issues out, every fault at its
file:line. `read_issue_file` also returns the Notes `check` reports about the source."""

from newsletter.issues.files import (
    SUFFIXES,
    issue_number_of,
    issue_path,
    list_issue_numbers,
    newest_issue,
)
from newsletter.issues.load import IssueFile, load_issue, load_issue_file, read_issue_file

__all__ = [
    "SUFFIXES",
    "IssueFile",
    "issue_number_of",
    "issue_path",
    "list_issue_numbers",
    "load_issue",
    "load_issue_file",
    "newest_issue",
    "read_issue_file",
]
