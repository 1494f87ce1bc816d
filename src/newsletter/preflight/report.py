"""Faults and link results in, the Findings `newsletter check` prints out (see checks.py).

This is where the bulk-sender line is drawn: missing sender authentication is an error for a
list of more than 5,000 recipients and a warning below it. Links are named by the item they
belong to, as `「title」 in 「项目」: URL: 404` (the quotation marks are the newsletter's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from newsletter.checks.lint import Finding, finding_label
from newsletter.content import Block, content_images, content_links
from newsletter.i18n import quote
from newsletter.models import Issue
from newsletter.preflight.faults import Fault
from newsletter.preflight.linkcheck import LinkResult

BULK_LINE = 5000  # recipients: Gmail's bulk-sender rules apply from ~5,000 messages a day
_ROBOT_REFUSALS = {401, 403, 429}
Level = Literal["error", "warning"]


def fault_findings(faults: Iterable[Fault], recipients: int) -> list[Finding]:
    findings = []
    for fault in faults:
        if fault.severity == "auth":
            bulk = recipients > BULK_LINE
            level: Level = "error" if bulk else "warning"
            side = "over" if bulk else "under"
            message = f"{fault.message} (list of {recipients:,}, {side} the bulk line of 5,000)"
            findings.append(Finding(level, fault.code, message))
        else:
            findings.append(Finding(fault.severity, fault.code, fault.message))
    return findings


def item_labels(issue: Issue, language: str) -> dict[str, str]:
    """Every http(s) URL of the issue -> where it first appears: `「title」 in 「section」` for an
    item's links and the links in its text, `intro`/`outro` for theirs (images included)."""
    labels: dict[str, str] = {}
    for url in _urls(issue.intro):
        labels.setdefault(url, "intro")
    if issue.cover is not None:
        labels.setdefault(issue.cover.src, "cover")
    for section in issue.sections:
        for url in section.title.links + _urls(section.intro):
            labels.setdefault(url, quote(section.title.text, language))
        for index, item in enumerate(section.items):
            where = finding_label(section, index, language)
            for url in item.own_links + _urls(item.summary):
                labels.setdefault(url, where)
    for url in _urls(issue.outro):
        labels.setdefault(url, "outro")
    return {url: where for url, where in labels.items() if url.startswith(("http:", "https:"))}


def _urls(blocks: tuple[Block, ...]) -> list[str]:
    """Links, and the images readers' mail clients fetch."""
    return content_links(blocks) + [image.src for image in content_images(blocks)]


def link_findings(results: Mapping[str, LinkResult], labels: Mapping[str, str]) -> list[Finding]:
    findings = []
    for url, result in results.items():
        where = f"{labels[url]}: " if url in labels else ""
        finding = _link_finding(result, f"{where}{url}")
        if finding is not None:
            findings.append(finding)
    return findings


def link_notes(results: Mapping[str, LinkResult], labels: Mapping[str, str]) -> list[str]:
    """Lines for the links that are fine but redirected for now (302, 303, 307), or were not
    fetched."""
    notes = []
    for url, result in results.items():
        where = f"{labels[url]}: " if url in labels else ""
        if result.skipped:
            notes.append(f"{where}{url}: not fetched ([check] link_skip)")
        elif result.ok and result.redirects and not _moved(result):
            notes.append(f"{where}{url} → {result.target} ({describe_chain(result)})")
    return notes


def describe_chain(result: LinkResult) -> str:
    """`301 → 302 → 200`: each hop's status, then the last answer's when there was one (a
    loop, a refused or timed-out hop ends without one)."""
    codes = [str(code) for code, _ in result.redirects]
    if result.status is not None and not result.error:
        codes.append(str(result.status))
    return " → ".join(codes)


def _moved(result: LinkResult) -> bool:
    """A permanent redirect on the way: a warning of its own, not a note."""
    return any(code in (301, 308) for code, _ in result.redirects)


def _link_finding(result: LinkResult, name: str) -> Finding | None:
    if result.skipped:
        return None
    via = f" (via {describe_chain(result)}, ending at {result.target})" if result.redirects else ""
    if result.error:
        slow = result.out_of_time or result.error.startswith("timeout")
        level: Level = "warning" if slow else "error"
        return Finding(level, "link-check", f"{name}: {result.error}{via}")
    status = result.status or 0
    if status in _ROBOT_REFUSALS:
        return Finding(
            "warning",
            "link-check",
            f"{name}: {status}{via}; if the site refuses robots, list its host in "
            "[check] link_skip",
        )
    if status >= 400:
        return Finding("error", "link-check", f"{name}: {status}{via}")
    if _moved(result):
        return Finding(
            "warning",
            "link-moved",
            f"{name}: moved permanently to {result.target}; link the new address",
        )
    return None
