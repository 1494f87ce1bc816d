"""What the delivery log says of one send, for the click report: (issue, list) in; the messages
sent per minute, and the deliveries that bounced, complained or brought an unsubscribe, out.

An unsubscribe token names a list and an address, not an issue, so an unsubscribe is the
issue's when it came after that reader's message of the issue and before their next one on
the list: the issue they last received. Suppressions that bounces and complaints wrote are
not unsubscribes (they are counted as what they are).
"""

from __future__ import annotations

from typing import NamedTuple

from newsletter.database.backend import Backend
from newsletter.database.records import BOUNCED, COMPLAINED
from newsletter.models import DeliveryStatus

_SENT = DeliveryStatus.SENT.value


class Figures(NamedTuple):
    sent: int
    per_minute: dict[str, int]  # "YYYY-MM-DDTHH:MM" (UTC) -> messages sent in that minute
    bounced: int  # deliveries with a hard or soft bounce report
    complained: int
    unsubscribed: int


class SendFigures:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def of(self, issue: int, list_name: str) -> Figures:
        per_minute = {
            str(minute): int(n)
            for minute, n in self.backend.fetch(
                "SELECT substr(sent_at, 1, 16), count(*) FROM deliveries"
                " WHERE issue = ? AND list = ? AND state = ? AND sent_at IS NOT NULL"
                " GROUP BY substr(sent_at, 1, 16)",
                (issue, list_name, _SENT),
            )
        }
        kinds = dict(
            self.backend.fetch(
                "SELECT CASE WHEN b.kind = 'complaint' THEN 'complaint' ELSE 'bounce' END,"
                " count(DISTINCT b.delivery_id) FROM bounce_reports b"
                " JOIN deliveries d ON d.id = b.delivery_id"
                " WHERE d.issue = ? AND d.list = ? AND b.kind IN ('hard', 'soft', 'complaint')"
                " GROUP BY CASE WHEN b.kind = 'complaint' THEN 'complaint' ELSE 'bounce' END",
                (issue, list_name),
            )
        )
        ((unsubscribed,),) = self.backend.fetch(
            "SELECT count(*) FROM deliveries d JOIN suppressions s"
            " ON s.list = d.list AND s.address = d.recipient"
            " WHERE d.issue = ? AND d.list = ? AND d.state = ? AND s.created_at >= d.sent_at"
            " AND s.source NOT IN (?, ?) AND NOT EXISTS (SELECT 1 FROM deliveries n"
            " WHERE n.list = d.list AND n.recipient = d.recipient AND n.state = ?"
            " AND n.sent_at > d.sent_at AND n.sent_at <= s.created_at)",
            (issue, list_name, _SENT, BOUNCED, COMPLAINED, _SENT),
        )
        return Figures(
            sent=sum(per_minute.values()),
            per_minute=per_minute,
            bounced=int(kinds.get("bounce", 0)),
            complained=int(kinds.get("complaint", 0)),
            unsubscribed=int(unsubscribed),
        )
