"""The settings and an open outbox in; the bounce reports held for review past `[privacy]
held_retention_days` deleted, and the server's text of the recorded ones past `[privacy]
bounce_text_days` cleared, out. A held report keeps what a stranger wrote (its sender, the
detail it gave) until the editor decides, and a recorded one the server's diagnostic, which
often names the reader; without a window either would stay for ever. The SMTP replies stored
with the delivery log's rows and the site's mail (`550 5.1.1 <ann@...>: Recipient address
rejected`) are the same kind of text and get the same window as a bounce's.

`expire_reports` runs where the windows are applied: as one of the worker's duties
(`BounceRetentionDuty`, every PRUNE_EVERY seconds on a connection of its own), and at the start of
every `newsletter bounces` (the command that holds them), so a project without a worker keeps the
window too. A waiting report counts from when it was held, a decided one from its decision. A
report whose mail is still in the bounce mailbox is held again, as new, the next time the mailbox
is read: the mailbox is the editor's, and only the outbox's copy has a window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from newsletter.config.settings import Settings
from newsletter.database import Database, open_project_database
from newsletter.errors import DatabaseError

DAY = 86_400.0
PRUNE_EVERY = 3600.0  # seconds between two rounds
FAULT_PAUSE = 60.0


@dataclass(frozen=True)
class Expired:
    """What one application of the windows did."""

    deleted: int  # held reports deleted
    cleared: int  # recorded reports whose server's text was cleared
    replies: int = 0  # delivery rows and site mails whose SMTP reply was cleared

    def lines(self, settings: Settings) -> list[str]:
        privacy, said = settings.privacy, []
        if self.deleted:
            said.append(
                f"{self.deleted} report(s) held for review deleted after"
                f" {privacy.held_retention_days} days ([privacy] held_retention_days)"
            )
        if self.cleared:
            said.append(
                f"{self.cleared} bounce report(s) kept without the server's text after"
                f" {privacy.bounce_text_days} days ([privacy] bounce_text_days)"
            )
        if self.replies:
            said.append(
                f"{self.replies} stored SMTP reply(ies) cleared after"
                f" {privacy.bounce_text_days} days ([privacy] bounce_text_days)"
            )
        return said


def expire_reports(database: Database, settings: Settings, *, now: float | None = None) -> Expired:
    """Apply both windows (one statement each: bounce reports are few; the replies' is a scan
    of the delivery log, once an hour); what they did."""
    moment = time.time() if now is None else now
    privacy = settings.privacy
    texts_before = moment - privacy.bounce_text_days * DAY
    return Expired(
        deleted=database.bounces.delete_held(moment - privacy.held_retention_days * DAY),
        cleared=database.bounces.clear_texts(texts_before),
        replies=database.deliveries.clear_replies(texts_before)
        + database.site_mail.clear_replies(texts_before),
    )


class BounceRetentionDuty:
    """The worker's duty (start, run_once -> seconds until the next look, stop): the held
    reports past their window deleted, and the recorded ones past theirs cleared of the
    server's text, as they age, on a connection opened for each round (a round runs off the
    event loop, on a thread of its own, and the connection is that thread's)."""

    name = "bounce-report retention"

    def __init__(self, settings: Settings, log: Callable[[str], None]) -> None:
        self.settings = settings
        self.log = log
        self.deleted = 0
        self.cleared = 0
        self.replies = 0

    async def start(self) -> None:
        return None

    async def run_once(self) -> float:
        try:
            expired = await asyncio.to_thread(self._round)
        except DatabaseError as exc:
            self.log(f"bounce-report retention: the outbox failed: {exc.message}")
            return FAULT_PAUSE
        self.deleted += expired.deleted
        self.cleared += expired.cleared
        self.replies += expired.replies
        for line in expired.lines(self.settings):
            self.log(f"bounce-report retention: {line}")
        return PRUNE_EVERY

    async def stop(self) -> None:
        return None

    def _round(self) -> Expired:
        with open_project_database(self.settings) as database:
            return expire_reports(database, self.settings)
