"""The consent ledger: what a person agreed to, when, from where, and every change after, in;
their whole record out (GDPR Art. 7(1): the sender must be able to show consent; Art. 15: the
person may see what is kept).

Append-only: events are added, never updated; only an erasure (Art. 17, forgotten.py) deletes
a person's events, all at once. One event per thing that happened to one person on one list:

    signup       the form or endpoint was posted (the confirmation mail is queued)
    confirm      the link in that mail was followed (when, from where)
    import       a row of another tool's export, with that tool's own consent columns
    add          the editor added the address (`newsletter subscribers add`)
    change       the reader changed lists or address on the preference page
    unsubscribe  the reader (or the editor) took the address off the list
    resubscribe  the reader undid their unsubscribe

Each keeps the client's address as `[privacy] consent_ip` says (the caller applies it), the user
agent, the source (the page or form, the import's file, `cli`), the hash and version of the
consent text the reader was shown, and evidence as JSON (an import's columns, a change's old
and new address).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from newsletter.database.backend import Backend, address_in, naming
from newsletter.database.records import now

EVENTS = ("signup", "confirm", "import", "add", "change", "unsubscribe", "resubscribe")
MAX_AGENT = 300
MAX_EVIDENCE = 20_000  # characters of JSON: a tool's consent columns, never a whole row


@dataclass(frozen=True)
class ConsentEvent:
    list: str
    address_key: str
    event: str
    at: str = ""  # ISO 8601 UTC; empty: now
    ip: str = ""
    user_agent: str = ""
    source: str = ""
    text_hash: str = ""
    text_version: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"unknown consent event {self.event!r}")


_COLUMNS = "list, address_key, event, at, ip, user_agent, source, text_hash, text_version, evidence"


def _values(event: ConsentEvent, stamp: str) -> tuple[str, ...]:
    evidence = json.dumps(dict(event.evidence), ensure_ascii=False, sort_keys=True, default=str)
    if len(evidence) > MAX_EVIDENCE:
        evidence = json.dumps({"truncated": evidence[:MAX_EVIDENCE]}, ensure_ascii=False)
    return (
        event.list,
        event.address_key,
        event.event,
        event.at or stamp,
        event.ip,
        event.user_agent[:MAX_AGENT],
        event.source,
        event.text_hash,
        event.text_version,
        evidence if event.evidence else "",
    )


def _event(row: tuple[Any, ...]) -> ConsentEvent:
    (list_name, key, event, at, ip, agent, source, text_hash, version, evidence) = row
    return ConsentEvent(
        list_name,
        key,
        event,
        at,
        ip,
        agent,
        source,
        text_hash,
        version,
        json.loads(evidence) if evidence else {},
    )


class ConsentLedger:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def record(self, event: ConsentEvent) -> None:
        self.record_all([event])

    def record_all(self, events: Iterable[ConsentEvent]) -> None:
        stamp = now()
        with self.backend.transaction():
            self.backend.many(
                f"INSERT INTO consent_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_values(event, stamp) for event in events],
            )

    def of(self, key: str) -> list[ConsentEvent]:
        """Every event of the person at `key`, oldest first."""
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM consent_events WHERE address_key = ? ORDER BY id", (key,)
        )
        return [_event(r) for r in rows]

    def latest(
        self, list_name: str, keys: Iterable[str], events: Iterable[str]
    ) -> dict[tuple[str, str], ConsentEvent]:
        """The last event of each kind in `events` for each of `keys` on `list_name`, keyed by
        (address key, event): what an export's consent columns show."""
        chosen, wanted = list(dict.fromkeys(keys)), list(events)
        if not chosen or not wanted:
            return {}
        rows = self.backend.fetch(
            f"SELECT {_COLUMNS} FROM consent_events WHERE list = ?"
            f" AND address_key IN ({','.join('?' * len(chosen))})"
            f" AND event IN ({','.join('?' * len(wanted))}) ORDER BY id",
            (list_name, *chosen, *wanted),
        )
        return {(e.address_key, e.event): e for e in map(_event, rows)}

    def erase(self, key: str) -> int:
        """The person's own events deleted, and their address taken out of anyone else's
        evidence (a `change` of old@ keeps `moved_to: new@`): how many of their own."""
        with self.backend.transaction():
            deleted = self.backend.run("DELETE FROM consent_events WHERE address_key = ?", (key,))
            self._redact(key)
        return deleted

    def _redact(self, key: str) -> int:
        """Every other event whose evidence names `key` (any JSON field, any case) keeps it
        with ERASED in its place: the event stays the other person's record. How many."""
        found = naming(self.backend, "consent_events", "evidence", key, "id, evidence")
        named = address_in(key)
        for ident, evidence in found:
            kept = _scrubbed(json.loads(evidence), named)
            self.backend.run(
                "UPDATE consent_events SET evidence = ? WHERE id = ?",
                (json.dumps(kept, ensure_ascii=False, sort_keys=True), ident),
            )
        return len(found)


ERASED = "(erased on request)"


def _scrubbed(value: Any, named: re.Pattern[str]) -> Any:
    """`value` (decoded JSON) with every occurrence of the address, in keys and strings, made
    ERASED."""
    if isinstance(value, str):
        return named.sub(ERASED, value)
    if isinstance(value, list):
        return [_scrubbed(v, named) for v in value]
    if isinstance(value, dict):
        return {named.sub(ERASED, k): _scrubbed(v, named) for k, v in value.items()}
    return value
