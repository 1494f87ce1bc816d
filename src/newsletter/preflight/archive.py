"""`check --archive`: every published issue's links fetched; the dead ones by issue and item.

Links rot after the send: the archive's pages keep linking what is gone. The fetcher is
`check --online`'s (linkcheck.py: public addresses only unless `[check] allow_private`, each
request's `[check] timeout`, the run's `[check] run_timeout`), each URL fetched once however
many issues link it. Its answers are kept in their own file, `.newsletter/archive-cache.json`,
for ARCHIVE_TTL: a weekly run fetches only what the last weeks did not answer, and the
pre-send check's short-lived answers (`[check] cache_ttl`) are never mixed with these old ones.
A link the run's deadline cut off is said so, not called dead; the next run goes on from the
cache. A link the issue file marks `dead:` is known: listed as such, never fetched nor failed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from newsletter.checks.lint import Finding
from newsletter.config.settings import Settings
from newsletter.draft import published_issues
from newsletter.errors import NewsletterError
from newsletter.issues import issue_path, read_issue_file
from newsletter.preflight.linkcheck import LinkChecker
from newsletter.preflight.lookup import Lookup, NetworkDownError
from newsletter.preflight.report import item_labels, link_findings
from newsletter.preflight.run import checking_tls_context
from newsletter.state.statecache import Cache

ARCHIVE_CACHE = "archive-cache.json"
ARCHIVE_TTL = 30 * 24 * 3600.0  # a good answer stands a month: four weekly runs share a fetch


@dataclass(frozen=True)
class IssueLinks:
    """One published issue's links that failed (errors: dead) or were in doubt (warnings: a
    timeout, the deadline, a permanent redirect, a site that refuses robots)."""

    number: int
    links: int
    findings: tuple[Finding, ...]
    # Links the issue file marks `dead:` (the editor knows): not fetched, not failed; each with
    # its item's label and its replacement, if any.
    known_dead: tuple[tuple[str, str, str | None], ...] = ()


@dataclass(frozen=True)
class ArchiveReport:
    issues: tuple[IssueLinks, ...]
    unreadable: tuple[str, ...]  # an issue file that no longer loads: why, one line each
    urls: int  # distinct links checked
    fetched: int  # of them, fetched in this run (the others: the cache, or [check] link_skip)
    skipped: str = ""  # why nothing was fetched (the network is down)

    @property
    def dead(self) -> int:
        return sum(1 for i in self.issues for f in i.findings if f.level == "error")

    @property
    def known_dead(self) -> int:
        return sum(len(i.known_dead) for i in self.issues)

    @property
    def doubtful(self) -> int:
        return sum(1 for i in self.issues for f in i.findings if f.level != "error")


def check_archive(settings: Settings) -> ArchiveReport:
    return asyncio.run(_check(settings))


async def _check(settings: Settings) -> ArchiveReport:
    deadline = asyncio.get_running_loop().time() + settings.check.run_timeout
    labels: dict[int, dict[str, str]] = {}
    known: dict[int, tuple[tuple[str, str, str | None], ...]] = {}
    unreadable = []
    for number in published_issues(settings):
        try:
            issue = read_issue_file(issue_path(settings.issues_dir, number)).issue
        except NewsletterError as exc:
            unreadable.append(f"issue {number}: {exc.message.splitlines()[0]}")
            continue
        found = item_labels(issue, settings.newsletter.language)
        dead = issue.dead_links()
        known[number] = tuple((url, found[url], dead[url]) for url in found if url in dead)
        labels[number] = {url: label for url, label in found.items() if url not in dead}
    urls = list(dict.fromkeys(url for found in labels.values() for url in found))
    cache = Cache(settings.state_dir / ARCHIVE_CACHE)
    config = settings.check.model_copy(update={"cache_ttl": ARCHIVE_TTL})
    lookup = Lookup(settings.check, cache)
    checker = LinkChecker(config, cache, lambda: checking_tls_context(settings), lookup)
    try:
        results = await checker.check(urls, deadline)
    except NetworkDownError as exc:
        return ArchiveReport((), tuple(unreadable), len(urls), 0, skipped=str(exc))
    finally:
        cache.save()
    issues = tuple(
        IssueLinks(
            number,
            len(found) + len(known[number]),
            tuple(link_findings({url: results[url] for url in found}, found)),
            known[number],
        )
        for number, found in labels.items()
    )
    # URLs, not requests: checker.fetched counts a HEAD and the GET after it as two.
    fetched = sum(1 for result in results.values() if not (result.cached or result.skipped))
    return ArchiveReport(issues, tuple(unreadable), len(urls), fetched)
