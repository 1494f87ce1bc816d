"""Subscribers in the database: signups, confirmations, imports, changes and departures in; each
list's memberships out (a send streams the confirmed ones).

One row per (list, address key): the address as it is sent to (ASCII), its key (the folded
form every table compares), its mailbox key (signup/pending.py: what the one-confirmation rule
counts), the name, a status (`pending` until the reader confirms, `confirmed`, `left`), the
nonce the pending confirmation's link carries (a link from before a re-signup or an erasure
names another nonce and confirms nothing), how the row came (`signup`, `import`, `cli`,
`preferences`) and its times. Every change is also an event in the consent ledger
(consent.py): this table says where a person stands now, the ledger how they got there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from newsletter.database.backend import Backend
from newsletter.database.records import now

PAGE = 1000  # rows read at a time when a whole list is streamed


class Status(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    LEFT = "left"


@dataclass(frozen=True)
class Membership:
    """One person on one list, as the table holds them."""

    id: int
    list: str
    address: str
    address_key: str
    mailbox_key: str
    name: str
    status: Status
    nonce: str
    source: str
    created_at: str
    confirmed_at: str | None
    left_at: str | None
    updated_at: str


_COLUMNS = (
    "id, list, address, address_key, mailbox_key, name, status, nonce, source, created_at,"
    " confirmed_at, left_at, updated_at"
)


def _membership(row: Sequence[object]) -> Membership:
    values = list(row)
    values[6] = Status(str(values[6]))
    return Membership(*values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Signed:
    """What a signup found and left: the row, and its status before (None: a new row)."""

    membership: Membership
    before: Status | None


class Roster:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def get(self, list_name: str, key: str) -> Membership | None:
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM subscribers WHERE list = ? AND address_key = ?",
            (list_name, key),
        )
        return _membership(rows[0]) if rows else None

    def of(self, key: str) -> list[Membership]:
        """Every list the person at `key` is (or was) on."""
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM subscribers WHERE address_key = ? ORDER BY list", (key,)
        )
        return [_membership(r) for r in rows]

    def sign_up(
        self, list_name: str, address: str, key: str, mailbox: str, nonce: str, source: str
    ) -> Signed:
        """A signup from the site: a new `pending` row with `nonce`; a reader who had left is
        pending again under the new nonce; a pending row keeps its nonce (the earlier link
        still works) and a confirmed one is left as it is. Run it inside the caller's
        transaction with the claim, the consent event and the mail it queues."""
        stamp = now()
        with self.backend.transaction():
            found = self.get(list_name, key)
            if found is None:
                self.backend.run(
                    "INSERT INTO subscribers (list, address, address_key, mailbox_key, name,"
                    " status, nonce, source, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, '', 'pending', ?, ?, ?, ?)",
                    (list_name, address, key, mailbox, nonce, source, stamp, stamp),
                )
            elif found.status is Status.LEFT:
                self.backend.run(
                    "UPDATE subscribers SET status = 'pending', nonce = ?, address = ?,"
                    " mailbox_key = ?, left_at = NULL, updated_at = ? WHERE id = ?",
                    (nonce, address, mailbox, stamp, found.id),
                )
            after = self.get(list_name, key)
        assert after is not None
        return Signed(after, None if found is None else found.status)

    def confirm(self, list_name: str, key: str, nonce: str) -> Membership | None:
        """The pending row whose link carried `nonce`, now confirmed; a row confirmed already
        as it is; None when no row waits for this link (another nonce, none, or it left)."""
        with self.backend.transaction():
            found = self.get(list_name, key)
            if found is None or found.status is Status.LEFT:
                return None
            if found.status is Status.CONFIRMED:
                return found
            if not nonce or found.nonce != nonce:
                return None
            stamp = now()
            self.backend.run(
                "UPDATE subscribers SET status = 'confirmed', nonce = '', confirmed_at = ?,"
                " updated_at = ? WHERE id = ?",
                (stamp, stamp, found.id),
            )
            return self.get(list_name, key)

    def add(
        self,
        list_name: str,
        address: str,
        key: str,
        mailbox: str,
        name: str,
        source: str,
        *,
        created_at: str | None = None,
        confirmed_at: str | None = None,
        rejoin: bool = True,
    ) -> Status | None:
        """The editor's addition (or an import's row): confirmed at once, their consent being
        the editor's to show. Returns the status before (None: new). A reader who left comes
        back only with `rejoin` (the editor's `add`; an import does not undo a departure)."""
        stamp = now()
        with self.backend.transaction():
            found = self.get(list_name, key)
            if found is None:
                self.backend.run(
                    "INSERT INTO subscribers (list, address, address_key, mailbox_key, name,"
                    " status, source, created_at, confirmed_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, 'confirmed', ?, ?, ?, ?)",
                    (
                        list_name,
                        address,
                        key,
                        mailbox,
                        name,
                        source,
                        created_at or stamp,
                        confirmed_at or stamp,
                        stamp,
                    ),
                )
                return None
            if found.status is Status.LEFT and not rejoin:
                return found.status
            self.backend.run(
                "UPDATE subscribers SET status = 'confirmed', nonce = '', left_at = NULL,"
                " name = CASE WHEN ? <> '' THEN ? ELSE name END, address = ?,"
                " confirmed_at = coalesce(confirmed_at, ?), updated_at = ? WHERE id = ?",
                (name, name, address, confirmed_at or stamp, stamp, found.id),
            )
            return found.status

    def leave(self, list_name: str, key: str) -> Status | None:
        """The person is no longer on the list (their row stays, as `left`); the status before,
        None when they had no row."""
        stamp = now()
        with self.backend.transaction():
            found = self.get(list_name, key)
            if found is None:
                return None
            if found.status is not Status.LEFT:
                self.backend.run(
                    "UPDATE subscribers SET status = 'left', nonce = '', left_at = ?,"
                    " updated_at = ? WHERE id = ?",
                    (stamp, stamp, found.id),
                )
            return found.status

    def move(
        self, list_name: str, old_key: str, address: str, key: str, mailbox: str
    ) -> Status | None:
        """The row of `old_key` now at `address` (confirmed: the new address proved itself by
        its link). When `key` is on the list already, it is confirmed there and the old row
        leaves. The old row's status before, None when it had none."""
        stamp = now()
        with self.backend.transaction():
            old = self.get(list_name, old_key)
            there = self.get(list_name, key)
            if there is not None:
                self.add(list_name, address, key, mailbox, "", "preferences")
                if old is not None and old.id != there.id:
                    self.leave(list_name, old_key)
            elif old is not None:
                self.backend.run(
                    "UPDATE subscribers SET address = ?, address_key = ?, mailbox_key = ?,"
                    " status = 'confirmed', nonce = '', left_at = NULL,"
                    " confirmed_at = coalesce(confirmed_at, ?), updated_at = ? WHERE id = ?",
                    (address, key, mailbox, stamp, stamp, old.id),
                )
            else:
                self.add(list_name, address, key, mailbox, "", "preferences")
            return None if old is None else old.status

    def confirmed(self, list_name: str) -> Iterator[tuple[str, str, str]]:
        """(address key, address, name) of every confirmed member, in key order, a page at a
        time: a send streams them, holding nothing the size of the list."""
        after = ""
        while True:
            rows = self.backend.fetch(
                "SELECT address_key, address, name FROM subscribers"
                " WHERE list = ? AND status = 'confirmed' AND address_key > ?"
                " ORDER BY address_key LIMIT ?",
                (list_name, after, PAGE),
            )
            yield from ((str(k), str(a), str(n)) for k, a, n in rows)
            if len(rows) < PAGE:
                return
            after = str(rows[-1][0])

    def members(self, list_name: str) -> Iterator[Membership]:
        """Every row of a list, in key order, a page at a time (an export)."""
        after = ""
        while True:
            rows = self.backend.fetch(
                f"SELECT {_COLUMNS} FROM subscribers WHERE list = ? AND address_key > ?"
                " ORDER BY address_key LIMIT ?",
                (list_name, after, PAGE),
            )
            yield from (_membership(r) for r in rows)
            if len(rows) < PAGE:
                return
            after = str(rows[-1][3])

    def counts(self, list_name: str) -> dict[Status, int]:
        found = dict(
            self.backend.fetch(
                "SELECT status, count(*) FROM subscribers WHERE list = ? GROUP BY status",
                (list_name,),
            )
        )
        return {status: int(found.get(status.value, 0)) for status in Status}

    def erase(self, key: str) -> int:
        """Every row of the person at `key` deleted (an erasure); how many there were."""
        with self.backend.transaction():
            return self.backend.run("DELETE FROM subscribers WHERE address_key = ?", (key,))
