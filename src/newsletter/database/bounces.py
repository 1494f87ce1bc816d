"""What bounce and complaint reports said about deliveries: (report, delivery) records in;
soft-bounce streaks, per-kind counts and the reports held for review out (migrations 3 and 5).

`bounce_reports` holds one row per (report, delivery): the report's key (its Message-ID or a
digest of its bytes; `smtp:ID` for a refusal at send time), what it said (kind, RFC 3463 status,
detail) and where it came from (dsn, arf, flufl.bounce, smtp). Its primary key is what makes
reading the same mailbox twice count nothing: `record_bounce` says whether the row is new. The
deliveries themselves never change: a `sent` row stays `sent`, its bounce beside it.

`held_reports` holds the reports the policy would not act on (no verified tag, sender not
proven), one per (mail, delivery), until the editor accepts or dismisses one: what it said, who
sent it and why it was held. Nothing in it counts towards a rate or a soft-bounce streak. They
hold a stranger's words, so they are deleted after a retention window (`delete_held`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from newsletter.database.backend import Backend, naming
from newsletter.database.deliveries import Deliveries
from newsletter.database.records import Delivery, now
from newsletter.importers.subscribers import fold_address
from newsletter.models import DeliveryStatus

S = DeliveryStatus
# States after which a message may have reached the reader's server, so a bounce can follow.
_WENT_OUT = (S.SENT.value, S.REJECTED.value, S.UNKNOWN.value)
_BOUNCED = ("hard", "soft")
_MAX_DETAIL = 1000
# The states of a held report: waiting for the editor, then accepted (recorded and applied as
# if proven) or dismissed (the mail is filed next time, nothing done).
HELD, ACCEPTED, DISMISSED = "held", "accepted", "dismissed"
_HELD_COLUMNS = "id, report, delivery_id, kind, status, detail, source, sender, reason, state"


@dataclass(frozen=True)
class HeldReport:
    """One report held for review, and the delivery it would act on."""

    id: int
    report: str
    delivery: Delivery
    kind: str
    status: str
    detail: str
    source: str
    sender: str
    reason: str
    state: str
    created_at: str


class Bounces:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._deliveries = Deliveries(backend)

    def record(
        self, report: str, delivery_id: int, kind: str, status: str, detail: str, source: str
    ) -> bool:
        """Store what `report` said about one delivery. False if that was stored before."""
        with self.backend.transaction():
            added = self.backend.run(
                "INSERT INTO bounce_reports"
                " (report, delivery_id, kind, status, detail, source, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (report, delivery_id, kind, status, detail[:_MAX_DETAIL], source, now()),
            )
        return added == 1

    def soft_streak(self, list_name: str, recipient: str, issue: int) -> int:
        """How many issues in a row, up to `issue`, bounced for `recipient` on `list_name`; an
        issue that went out and did not bounce ends the streak."""
        rows = self.backend.fetch(
            "SELECT d.state, (SELECT count(*) FROM bounce_reports b"
            " WHERE b.delivery_id = d.id AND b.kind IN (?, ?))"
            " FROM deliveries d WHERE d.list = ? AND d.recipient = ? AND d.issue <= ?"
            " ORDER BY d.issue DESC",
            (*_BOUNCED, list_name, fold_address(recipient), issue),
        )
        streak = 0
        for state, bounced in rows:
            if state not in _WENT_OUT:
                continue  # skipped or never tried: says nothing about the mailbox
            if not bounced:
                break
            streak += 1
        return streak

    def counts(self, issue: int, list_name: str, since: str = "") -> dict[str, int]:
        """Deliveries of (issue, list) per kind of report, each delivery once per kind; only
        reports recorded at or after `since` when given."""
        rows = self.backend.fetch(
            "SELECT b.kind, count(DISTINCT b.delivery_id) FROM bounce_reports b"
            " JOIN deliveries d ON d.id = b.delivery_id"
            " WHERE d.issue = ? AND d.list = ? AND b.created_at >= ? GROUP BY b.kind",
            (issue, list_name, since),
        )
        return {kind: int(n) for kind, n in rows}

    def run_totals(self, issue: int, list_name: str, since: str) -> tuple[int, int, int]:
        """Since `since` (a run's start): messages answered (sent or rejected), deliveries with
        a hard bounce, deliveries with a complaint. What a send's rate guard divides."""
        ((answered,),) = self.backend.fetch(
            "SELECT count(*) FROM deliveries WHERE issue = ? AND list = ? AND state IN (?, ?)"
            " AND updated_at >= ?",
            (issue, list_name, S.SENT.value, S.REJECTED.value, since),
        )
        counts = self.counts(issue, list_name, since)
        return int(answered), counts.get("hard", 0), counts.get("complaint", 0)

    def held_by_report(self, report: str, delivery_id: int) -> HeldReport | None:
        """The held report of this key about this delivery (in whatever state), if any."""
        found = self.backend.fetch(
            f"SELECT {_HELD_COLUMNS}, created_at FROM held_reports"
            " WHERE report = ? AND delivery_id = ?",
            (report, delivery_id),
        )
        held = self._to_held_reports(found)
        return held[0] if held else None

    def hold(
        self,
        report: str,
        delivery_id: int,
        kind: str,
        status: str,
        detail: str,
        source: str,
        sender: str,
        reason: str,
    ) -> bool:
        """Keep `report` for review instead of acting on it. False if it was held before."""
        with self.backend.transaction():
            added = self.backend.run(
                "INSERT INTO held_reports (report, delivery_id, kind, status, detail, source,"
                " sender, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (
                    report,
                    delivery_id,
                    kind,
                    status,
                    detail[:_MAX_DETAIL],
                    source,
                    sender[:_MAX_DETAIL],
                    reason[:_MAX_DETAIL],
                    now(),
                ),
            )
        return added == 1

    def held(self, state: str = HELD) -> list[HeldReport]:
        """The reports in `state`, oldest first."""
        found = self.backend.fetch(
            f"SELECT {_HELD_COLUMNS}, created_at FROM held_reports WHERE state = ? ORDER BY id",
            (state,),
        )
        return self._to_held_reports(found)

    def held_report(self, held_id: int) -> HeldReport | None:
        found = self.backend.fetch(
            f"SELECT {_HELD_COLUMNS}, created_at FROM held_reports WHERE id = ?", (held_id,)
        )
        held = self._to_held_reports(found)
        return held[0] if held else None

    def held_count(self) -> int:
        """How many reports wait for the editor's review."""
        ((found,),) = self.backend.fetch(
            "SELECT count(*) FROM held_reports WHERE state = ?", (HELD,)
        )
        return int(found)

    def delete_held(self, before: float) -> int:
        """Delete the held reports from before `before` (Unix seconds): a waiting one by when
        it was held, a decided one by when it was decided (its decision must outlive it long
        enough for the next read of the mailbox to file its mail). How many were deleted."""
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(before))
        with self.backend.transaction():
            return self.backend.run(
                "DELETE FROM held_reports WHERE COALESCE(decided_at, created_at) < ?", (cutoff,)
            )

    def forget_reader(self, address: str) -> int:
        """A forgotten person's traces in the bounce reports (GDPR Art. 17), found through
        their delivery rows, so before those rows lose the address: the reports held for
        review are deleted (they quote a stranger's mail about them); the recorded ones keep
        their kind, status and source, which the sends' bounce counts and rates are made of,
        and lose their detail (a server's diagnostic names the address). How many reports."""
        rows = "(SELECT id FROM deliveries WHERE recipient = ?)"
        key = fold_address(address)
        db = self.backend
        with db.transaction():
            held = db.run(f"DELETE FROM held_reports WHERE delivery_id IN {rows}", (key,))
            scrubbed = db.run(
                f"UPDATE bounce_reports SET detail = '' WHERE delivery_id IN {rows}", (key,)
            )
            # Reports about others that name them go the same way: a held one they sent or
            # whose text quotes them, a recorded one's text that does.
            others = {
                i
                for column in ("sender", "detail")
                for (i,) in naming(db, "held_reports", column, key)
            }
            db.many("DELETE FROM held_reports WHERE id = ?", [(i,) for i in sorted(others)])
            quoted = naming(db, "bounce_reports", "detail", key, "report, delivery_id")
            db.many(
                "UPDATE bounce_reports SET detail = '' WHERE report = ? AND delivery_id = ?", quoted
            )
        return held + scrubbed + len(others) + len(quoted)

    def clear_texts(self, before: float) -> int:
        """The server's text of the reports recorded before `before` (Unix seconds) cleared:
        their kind and status stay (the sends' bounce counts, rates and soft-bounce streaks).
        How many."""
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(before))
        with self.backend.transaction():
            return self.backend.run(
                "UPDATE bounce_reports SET detail = '' WHERE created_at < ? AND detail <> ''",
                (cutoff,),
            )

    def decide(self, held_id: int, state: str) -> bool:
        """Mark a held report ACCEPTED or DISMISSED; False if it is not (or no longer) held."""
        with self.backend.transaction():
            changed = self.backend.run(
                "UPDATE held_reports SET state = ?, decided_at = ? WHERE id = ? AND state = ?",
                (state, now(), held_id, HELD),
            )
        return changed == 1

    def _to_held_reports(self, found: list[tuple[Any, ...]]) -> list[HeldReport]:
        rows = {r.id: r for r in self._deliveries.by_id(int(f[2]) for f in found)}
        held = []
        for (
            ident,
            report,
            delivery_id,
            kind,
            status,
            detail,
            source,
            sender,
            reason,
            state,
            at,
        ) in found:
            if int(delivery_id) in rows:  # a delivery is never deleted; if it were, skip it
                held.append(
                    HeldReport(
                        int(ident),
                        report,
                        rows[int(delivery_id)],
                        kind,
                        status,
                        detail,
                        source,
                        sender,
                        reason,
                        state,
                        at,
                    )
                )
        return held
