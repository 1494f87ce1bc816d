"""The outbox schema as an ordered list of numbered migrations, in: a backend name; out: the SQL.

Both backends hold the same tables. Each migration has its SQLite and its PostgreSQL text (most
statements are the same; the types and the identity column differ). `migrate` in each backend
applies every migration above the version stored in `schema_migrations`, in one transaction
each, under the backend's write lock, so two processes starting at once apply each exactly once.

To change the schema, append a Migration with the next number; never edit one that has shipped
(a database that already ran it would never see the change).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    about: str
    sqlite: str
    postgres: str


TRACKING = {
    "sqlite": (
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, about TEXT NOT NULL, applied_at TEXT NOT NULL)"
    ),
    "postgres": (
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, about TEXT NOT NULL, applied_at TEXT NOT NULL)"
    ),
}

_DELIVERIES = """
CREATE TABLE IF NOT EXISTS deliveries (
    id              {id},
    issue           INTEGER NOT NULL,
    list            TEXT    NOT NULL,
    recipient       TEXT    NOT NULL,
    message_id      TEXT    UNIQUE,
    state           TEXT    NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    smtp_code       INTEGER,
    smtp_reply      TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    sent_at         TEXT,
    next_attempt_at {real} NOT NULL DEFAULT 0,
    UNIQUE (issue, list, recipient)
);
-- No index on state: every state change would update it (~40 % of a send's SQLite time), and
-- the UNIQUE key's (issue, list) prefix already narrows every query to one list.
CREATE TABLE IF NOT EXISTS suppressions (
    list       TEXT NOT NULL,
    address    TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (list, address)
);
"""

# The row is the snapshot: what building the message needs (the envelope address as written
# and the name) is stored at planning, so a send never holds the list in memory. `seen` is the
# plan generation that last found the recipient on the list (an older one on a waiting row means
# the reader left); `owner` is the worker that claimed the row; `tries` counts the attempts of
# the current run (max_attempts applies to it, and planning resets it). The partial index holds only
# the rows free to claim, so a claim reads a few index pages whatever the size of the outbox,
# and a row leaves it once, when it is claimed.
_SNAPSHOT = """
ALTER TABLE deliveries ADD COLUMN envelope TEXT;
ALTER TABLE deliveries ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN seen INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN owner TEXT;
ALTER TABLE deliveries ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS deliveries_free ON deliveries (issue, list, id)
    WHERE state IN ('pending', 'deferred') AND owner IS NULL;
CREATE INDEX IF NOT EXISTS deliveries_owner ON deliveries (owner) WHERE owner IS NOT NULL;
CREATE TABLE IF NOT EXISTS plans (
    issue      INTEGER NOT NULL,
    list       TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    planned_at TEXT    NOT NULL,
    planned_by TEXT    NOT NULL,
    PRIMARY KEY (issue, list)
);
CREATE TABLE IF NOT EXISTS workers (
    id          TEXT    PRIMARY KEY,
    issue       INTEGER NOT NULL,
    list        TEXT    NOT NULL,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    started_at  TEXT    NOT NULL,
    seen_at     TEXT    NOT NULL,
    lease_until {real}  NOT NULL,
    state       TEXT    NOT NULL DEFAULT 'active'
);
"""

# What bounce and complaint reports said about deliveries (outbox/bounces.py); the index finds a
# reader's earlier issues for the soft-bounce streak (planning pays one index insert per row).
_BOUNCES = """
CREATE TABLE IF NOT EXISTS bounce_reports (
    report      TEXT   NOT NULL,
    delivery_id BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    status      TEXT   NOT NULL DEFAULT '',
    detail      TEXT   NOT NULL DEFAULT '',
    source      TEXT   NOT NULL,
    created_at  TEXT   NOT NULL,
    PRIMARY KEY (report, delivery_id)
);
CREATE INDEX IF NOT EXISTS bounce_reports_delivery ON bounce_reports (delivery_id);
CREATE INDEX IF NOT EXISTS deliveries_reader ON deliveries (list, recipient, issue);
"""

# Message-IDs lose their UNIQUE index: they are a hash of the UNIQUE (issue, list, recipient)
# key, and keeping a random-order index up to date halved the speed of planning a large list.
# SQLite cannot drop a column's UNIQUE constraint: the table is rebuilt (its indexes with it).
_COLUMNS_V3 = (
    "id, issue, list, recipient, message_id, state, attempts, smtp_code, smtp_reply,"
    " created_at, updated_at, sent_at, next_attempt_at, envelope, name, seen, owner, tries"
)
_NO_UNIQUE_ID_SQLITE = f"""
CREATE TABLE deliveries_v4 (
    id              INTEGER PRIMARY KEY,
    issue           INTEGER NOT NULL,
    list            TEXT    NOT NULL,
    recipient       TEXT    NOT NULL,
    message_id      TEXT,
    state           TEXT    NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    smtp_code       INTEGER,
    smtp_reply      TEXT    NOT NULL DEFAULT '',
    created_at      TEXT    NOT NULL,
    updated_at      TEXT    NOT NULL,
    sent_at         TEXT,
    next_attempt_at REAL    NOT NULL DEFAULT 0,
    envelope        TEXT,
    name            TEXT    NOT NULL DEFAULT '',
    seen            INTEGER NOT NULL DEFAULT 0,
    owner           TEXT,
    tries           INTEGER NOT NULL DEFAULT 0,
    UNIQUE (issue, list, recipient)
);
INSERT INTO deliveries_v4 ({_COLUMNS_V3}) SELECT {_COLUMNS_V3} FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_v4 RENAME TO deliveries;
CREATE INDEX deliveries_free ON deliveries (issue, list, id)
    WHERE state IN ('pending', 'deferred') AND owner IS NULL;
CREATE INDEX deliveries_owner ON deliveries (owner) WHERE owner IS NOT NULL;
CREATE INDEX deliveries_reader ON deliveries (list, recipient, issue);
"""
_NO_UNIQUE_ID_POSTGRES = """
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_message_id_key;
"""

# Reports that named no verified VERP tag and whose sender was not proven (outbox/bounces.py):
# held for the editor's review instead of acted on. One row per (mail, the delivery it names):
# the report key is the mail's own Message-ID, which its sender chooses, so a decision on one
# held report must never apply to another mail reusing that key for another delivery.
_HELD = """
CREATE TABLE IF NOT EXISTS held_reports (
    id          {id},
    report      TEXT   NOT NULL,
    delivery_id BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    status      TEXT   NOT NULL DEFAULT '',
    detail      TEXT   NOT NULL DEFAULT '',
    source      TEXT   NOT NULL,
    sender      TEXT   NOT NULL DEFAULT '',
    reason      TEXT   NOT NULL,
    state       TEXT   NOT NULL DEFAULT 'held',
    created_at  TEXT   NOT NULL,
    decided_at  TEXT,
    UNIQUE (report, delivery_id)
);
"""

# Held reports are deleted after a retention window (bounces/retention.py), and the editor
# accepts or dismisses one by the id `--held` showed: an id must never come back for another
# report. SQLite hands out the highest id plus one, so deleting the newest row would give its id
# to the next; AUTOINCREMENT never reuses one, and a table cannot gain it in place. PostgreSQL's
# identity never reuses an id: nothing to do there.
_HELD_IDS_SQLITE = """
CREATE TABLE held_reports_ids (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    report      TEXT   NOT NULL,
    delivery_id BIGINT NOT NULL,
    kind        TEXT   NOT NULL,
    status      TEXT   NOT NULL DEFAULT '',
    detail      TEXT   NOT NULL DEFAULT '',
    source      TEXT   NOT NULL,
    sender      TEXT   NOT NULL DEFAULT '',
    reason      TEXT   NOT NULL,
    state       TEXT   NOT NULL DEFAULT 'held',
    created_at  TEXT   NOT NULL,
    decided_at  TEXT,
    UNIQUE (report, delivery_id)
);
INSERT INTO held_reports_ids SELECT id, report, delivery_id, kind, status, detail, source, sender,
    reason, state, created_at, decided_at FROM held_reports;
DROP TABLE held_reports;
ALTER TABLE held_reports_ids RENAME TO held_reports;
"""

# What readers read (outbox/clicks.py, outbox/sentlinks.py): one row per request of a tracked
# link, and the links each send of an issue to a list carried, by place. A click names its
# outbox row only in `per-reader` mode (`delivery_id`, NULL otherwise). The indexes: a report
# reads one (issue, list) in time order; retention deletes by time; forgetting a reader finds
# their rows' clicks.
_CLICKS = """
CREATE TABLE IF NOT EXISTS clicks (
    id             {id},
    issue          INTEGER  NOT NULL,
    list           TEXT     NOT NULL,
    at             {real}   NOT NULL,
    region         SMALLINT NOT NULL,
    section        INTEGER  NOT NULL,
    item           INTEGER  NOT NULL,
    link           INTEGER  NOT NULL,
    method         TEXT     NOT NULL,
    prefetch       SMALLINT NOT NULL DEFAULT 0,
    agent          TEXT     NOT NULL DEFAULT '',
    ip             TEXT     NOT NULL DEFAULT '',
    since_delivery {real},
    delivery_id    BIGINT
);
CREATE INDEX IF NOT EXISTS clicks_send ON clicks (issue, list, at);
CREATE INDEX IF NOT EXISTS clicks_at ON clicks (at);
CREATE INDEX IF NOT EXISTS clicks_delivery ON clicks (delivery_id) WHERE delivery_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS tracked_sends (
    issue       INTEGER NOT NULL,
    list        TEXT    NOT NULL,
    mode        TEXT    NOT NULL,
    recorded_at TEXT    NOT NULL,
    PRIMARY KEY (issue, list)
);
CREATE TABLE IF NOT EXISTS tracked_links (
    issue   INTEGER  NOT NULL,
    list    TEXT     NOT NULL,
    region  SMALLINT NOT NULL,
    section INTEGER  NOT NULL,
    item    INTEGER  NOT NULL,
    link    INTEGER  NOT NULL,
    url     TEXT     NOT NULL,
    PRIMARY KEY (issue, list, region, section, item, link)
);
"""

# Readers in the database (issue 22): who signed up, confirmed, changed or left (`subscribers`,
# one row per list and address), the append-only consent ledger, the one confirmation per
# mailbox per window (`confirmation_claims`), the keyed hashes of people erased on request
# (`forgotten`, and the key they are made with, wrapped under each secret), and the site's own
# mail waiting for `newsletter worker` (`site_mail`). The partial indexes hold only the rows a
# send reads (confirmed) and the mail due now, whatever the size of the history.
_READERS = """
CREATE TABLE IF NOT EXISTS subscribers (
    id           {id},
    list         TEXT NOT NULL,
    address      TEXT NOT NULL,
    address_key  TEXT NOT NULL,
    mailbox_key  TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL,
    nonce        TEXT NOT NULL DEFAULT '',
    source       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    confirmed_at TEXT,
    left_at      TEXT,
    updated_at   TEXT NOT NULL,
    UNIQUE (list, address_key)
);
CREATE INDEX IF NOT EXISTS subscribers_confirmed ON subscribers (list, address_key)
    WHERE status = 'confirmed';
CREATE INDEX IF NOT EXISTS subscribers_person ON subscribers (address_key);
CREATE TABLE IF NOT EXISTS consent_events (
    id           {id},
    list         TEXT NOT NULL,
    address_key  TEXT NOT NULL,
    event        TEXT NOT NULL,
    at           TEXT NOT NULL,
    ip           TEXT NOT NULL DEFAULT '',
    user_agent   TEXT NOT NULL DEFAULT '',
    source       TEXT NOT NULL DEFAULT '',
    text_hash    TEXT NOT NULL DEFAULT '',
    text_version TEXT NOT NULL DEFAULT '',
    evidence     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS consent_events_person ON consent_events (address_key, id);
CREATE TABLE IF NOT EXISTS confirmation_claims (
    mailbox_key TEXT PRIMARY KEY,
    sent_at     {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS forgotten (
    digest     TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS forget_keys (
    key_id     TEXT PRIMARY KEY,
    wrapped    TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS site_mail (
    id          {id},
    kind        TEXT NOT NULL,
    list        TEXT NOT NULL,
    recipient   TEXT NOT NULL,
    address_key TEXT NOT NULL,
    nonce       TEXT NOT NULL DEFAULT '',
    detail      TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL DEFAULT 'due',
    attempts    INTEGER NOT NULL DEFAULT 0,
    due_at      {real} NOT NULL,
    owner       TEXT,
    lease_until {real},
    smtp_code   INTEGER,
    smtp_reply  TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    sent_at     TEXT
);
CREATE INDEX IF NOT EXISTS site_mail_due ON site_mail (due_at, id) WHERE state = 'due';
CREATE INDEX IF NOT EXISTS site_mail_owner ON site_mail (owner) WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS site_mail_person ON site_mail (address_key);
"""

# A scheduled send: one (issue, list) to start at `due_at` (Unix seconds, UTC), in the zone the
# editor gave (for showing it back); at most one waiting or running per (issue, list).
_SCHEDULES = """
CREATE TABLE IF NOT EXISTS schedules (
    id          {id},
    issue       INTEGER NOT NULL,
    list        TEXT NOT NULL,
    due_at      {real} NOT NULL,
    zone        TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'due',
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL DEFAULT '',
    owner       TEXT,
    lease_until {real},
    started_at  TEXT,
    started_by  TEXT NOT NULL DEFAULT '',
    finished_at TEXT,
    outcome     TEXT NOT NULL DEFAULT '',
    updated_at  TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS schedules_open ON schedules (issue, list)
    WHERE state IN ('due', 'started');
CREATE INDEX IF NOT EXISTS schedules_waiting ON schedules (due_at, id)
    WHERE state IN ('due', 'started');
"""

# Test sends, one row per test (outbox/testsends.py): a staging list's send of an issue goes out
# again when the message changed. The deliveries hold the latest test; each earlier one keeps here
# what it did (its counts, when it began), and the fingerprint of the message it sent.
_TEST_SENDS = """
CREATE TABLE IF NOT EXISTS test_sends (
    issue       INTEGER NOT NULL,
    list        TEXT    NOT NULL,
    round       INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,
    started_at  TEXT    NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    sent        INTEGER,
    recipients  INTEGER,
    outcome     TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (issue, list, round)
);
"""

# Each worker's last beat, written every few seconds while it runs: `newsletter doctor` tells a
# live worker from a dead one by its age, on any machine that shares the outbox.
_HEARTBEATS = """
CREATE TABLE IF NOT EXISTS heartbeats (
    worker  TEXT    PRIMARY KEY,
    host    TEXT    NOT NULL,
    pid     INTEGER NOT NULL,
    beat_at {real}  NOT NULL
);
"""

# What a scheduled send keeps of `send`'s options, passed on to the send the worker starts
# (NULL: newsletter.toml's [send] value at that time).
_SCHEDULE_OPTIONS = """
ALTER TABLE schedules ADD COLUMN rate {real};
ALTER TABLE schedules ADD COLUMN concurrency INTEGER;
"""

# Provider webhook events already applied, by the provider's own event id: a retried or replayed
# event is answered and changes nothing. Pruned by age (seen_at, Unix seconds).
_WEBHOOK_EVENTS = """
CREATE TABLE IF NOT EXISTS webhook_events (
    provider TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seen_at  {real} NOT NULL,
    PRIMARY KEY (provider, event_id)
);
-- Every verified request prunes by age: the index keeps that from reading the whole table.
CREATE INDEX IF NOT EXISTS webhook_events_seen ON webhook_events (seen_at);
"""

# Welcome sequences (issue 35). A step's key in the delivery log is STEP_KEYS + its id here, an
# issue number no issue has, so each step is one more (issue, list) of the one log with its
# guarantees. An enrolment is a reader in a sequence: `step` the number of the last step planned
# for them (0: none yet), `last_at` when (joining, at first), both Unix seconds; the due
# steps are found by (sequence, step, last_at), a range of the index whatever the enrolled.
_SEQUENCES = """
CREATE TABLE IF NOT EXISTS sequence_steps (
    id       {id},
    sequence TEXT    NOT NULL,
    step     INTEGER NOT NULL,
    UNIQUE (sequence, step)
);
CREATE TABLE IF NOT EXISTS enrolments (
    id          {id},
    sequence    TEXT    NOT NULL,
    list        TEXT    NOT NULL,
    address_key TEXT    NOT NULL,
    joined_at   {real}  NOT NULL,
    step        INTEGER NOT NULL DEFAULT 0,
    last_at     {real}  NOT NULL,
    source      TEXT    NOT NULL DEFAULT '',
    UNIQUE (sequence, list, address_key)
);
CREATE INDEX IF NOT EXISTS enrolments_due ON enrolments (sequence, step, last_at);
CREATE INDEX IF NOT EXISTS enrolments_joined ON enrolments (sequence, step, joined_at);
CREATE INDEX IF NOT EXISTS enrolments_person ON enrolments (address_key);
"""

# Subject tests (issue 35): one per (issue, list). The subjects as JSON, the sample's share and
# when the decision falls due; once decided, the winner's index and the figures behind it.
_SUBJECT_TESTS = """
CREATE TABLE IF NOT EXISTS subject_tests (
    issue      INTEGER NOT NULL,
    list       TEXT    NOT NULL,
    subjects   TEXT    NOT NULL,
    sample     {real}  NOT NULL,
    decide_at  {real}  NOT NULL,
    state      TEXT    NOT NULL DEFAULT 'sampling',
    winner     INTEGER,
    detail     TEXT    NOT NULL DEFAULT '',
    created_at TEXT    NOT NULL,
    decided_at TEXT,
    PRIMARY KEY (issue, list)
);
"""

# The relay (smtp.name or an [smtp.relays.NAME]) that took or holds each row's message: NULL for
# rows no relay answered, and for rows sent before there were several.
_RELAY = """
ALTER TABLE deliveries ADD COLUMN relay TEXT;
"""

# A reader is in a sequence once, whatever lists enrolled them (issue 40): on two of its lists
# they were two enrolments, so each step went twice. The one kept of two is the furthest along
# (the reader never gets a step again), the first enrolled of equals.
_ENROLLED_ONCE = """
DELETE FROM enrolments WHERE EXISTS (SELECT 1 FROM enrolments o
    WHERE o.sequence = enrolments.sequence AND o.address_key = enrolments.address_key
    AND (o.step > enrolments.step OR (o.step = enrolments.step AND o.id < enrolments.id)));
CREATE UNIQUE INDEX IF NOT EXISTS enrolments_once ON enrolments (sequence, address_key);
"""

# Mailgun's signature covers only its timestamp and token, never the event: each token is kept
# with a digest of the one request it signed, until its timestamp leaves the tolerance (`stamp`,
# Unix seconds), so the signature cannot be reused over another event.
_WEBHOOK_TOKENS = """
CREATE TABLE IF NOT EXISTS webhook_tokens (
    provider TEXT NOT NULL,
    token    TEXT NOT NULL,
    digest   TEXT NOT NULL,
    stamp    {real} NOT NULL,
    PRIMARY KEY (provider, token)
);
CREATE INDEX IF NOT EXISTS webhook_tokens_stamp ON webhook_tokens (stamp);
"""

# What a real list's send of an issue went out as (sentissues.py): the sample reader's subject,
# preheader, text and HTML parts and links, kept from the first send on, so that `check`, `send`
# and `diff` can say an edited issue is not what readers have, without git. No reader's data:
# the sample recipient is the config's made-up one.
_SENT_ISSUES = """
CREATE TABLE IF NOT EXISTS sent_issues (
    issue       INTEGER NOT NULL,
    list        TEXT    NOT NULL,
    sent_at     TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    version     TEXT    NOT NULL,
    PRIMARY KEY (issue, list)
);
"""

MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "deliveries and suppressions",
        sqlite=_DELIVERIES.format(id="INTEGER PRIMARY KEY", real="REAL")
        + "DROP INDEX IF EXISTS deliveries_state;",
        postgres=_DELIVERIES.format(
            id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"
        ),
    ),
    Migration(
        2,
        "rows carry their snapshot; claims, plans and workers",
        sqlite=_SNAPSHOT.format(real="REAL"),
        postgres=_SNAPSHOT.format(real="DOUBLE PRECISION"),
    ),
    Migration(3, "bounce and complaint reports", sqlite=_BOUNCES, postgres=_BOUNCES),
    Migration(
        4,
        "Message-IDs without a UNIQUE index (faster planning)",
        sqlite=_NO_UNIQUE_ID_SQLITE,
        postgres=_NO_UNIQUE_ID_POSTGRES,
    ),
    Migration(
        5,
        "bounce reports held for review",
        sqlite=_HELD.format(id="INTEGER PRIMARY KEY"),
        postgres=_HELD.format(id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    ),
    Migration(
        6,
        "click events and the links each tracked send carried",
        sqlite=_CLICKS.format(id="INTEGER PRIMARY KEY", real="REAL"),
        postgres=_CLICKS.format(
            id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"
        ),
    ),
    Migration(
        7,
        "subscribers, the consent ledger, confirmation claims, forgotten people, site mail",
        sqlite=_READERS.format(id="INTEGER PRIMARY KEY", real="REAL"),
        postgres=_READERS.format(
            id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"
        ),
    ),
    Migration(
        8,
        "scheduled sends",
        sqlite=_SCHEDULES.format(id="INTEGER PRIMARY KEY", real="REAL"),
        postgres=_SCHEDULES.format(
            id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"
        ),
    ),
    Migration(9, "test sends, one row per test", sqlite=_TEST_SENDS, postgres=_TEST_SENDS),
    Migration(
        10,
        "a scheduled send keeps --rate and --concurrency",
        sqlite=_SCHEDULE_OPTIONS.format(real="REAL"),
        postgres=_SCHEDULE_OPTIONS.format(real="DOUBLE PRECISION"),
    ),
    Migration(11, "held reports' ids never reused", sqlite=_HELD_IDS_SQLITE, postgres=""),
    Migration(
        12,
        "workers' heartbeats",
        sqlite=_HEARTBEATS.format(real="REAL"),
        postgres=_HEARTBEATS.format(real="DOUBLE PRECISION"),
    ),
    Migration(
        13,
        "provider webhook events seen, each applied once",
        sqlite=_WEBHOOK_EVENTS.format(real="REAL"),
        postgres=_WEBHOOK_EVENTS.format(real="DOUBLE PRECISION"),
    ),
    Migration(14, "the relay each delivery went through", sqlite=_RELAY, postgres=_RELAY),
    Migration(
        15,
        "welcome sequences: their steps' keys in the log, readers enrolled",
        sqlite=_SEQUENCES.format(id="INTEGER PRIMARY KEY", real="REAL"),
        postgres=_SEQUENCES.format(
            id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"
        ),
    ),
    Migration(
        16,
        "subject tests: the subjects, the sample, the decision",
        sqlite=_SUBJECT_TESTS.format(real="REAL"),
        postgres=_SUBJECT_TESTS.format(real="DOUBLE PRECISION"),
    ),
    Migration(
        17,
        "a reader in a sequence once, whatever lists enrolled them",
        sqlite=_ENROLLED_ONCE,
        postgres=_ENROLLED_ONCE,
    ),
    Migration(
        18,
        "provider webhook signature tokens, each good for one request",
        sqlite=_WEBHOOK_TOKENS.format(real="REAL"),
        postgres=_WEBHOOK_TOKENS.format(real="DOUBLE PRECISION"),
    ),
    Migration(
        19,
        "what each issue went to a real list as",
        sqlite=_SENT_ISSUES,
        postgres=_SENT_ISSUES,
    ),
]

LATEST = MIGRATIONS[-1].version


def statements(script: str) -> list[str]:
    """A script split into statements (no `;` inside the schema's literals or comments)."""
    kept = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in kept.split(";") if s.strip()]
