"""The worker's duty of welcome sequences: the sequence files and the outbox's enrolments in; each
due step planned once per reader and sent by the send engine, out.

Each look, outside the quiet hours (quiet.py): every sequence is read afresh (an edited step goes
to the readers who have not had it; a removed one is passed over: a reader goes to the next number
above the last they had); for each step, the readers it is due to (their last step, or joining,
its `after` ago, still confirmed and not suppressed) get its row in the delivery log and move on,
a page per transaction (outbox/enrolments.py); then each step's free rows are sent by the engine
under this worker's lease (steps.py). Rows of a step whose file is gone are skipped.

Exactly once: the delivery log's UNIQUE key plans a step once per reader whoever plans it; the
engine's claims give each row to one worker; a worker killed during an upload leaves its row
`sending`, which becomes `unknown` (never sent again unasked) when the next worker starts
(SQLite: one worker per project) or its lease runs out (PostgreSQL: the engine's reaping).
A sequence with a fault is reported once per change of its files and left alone meanwhile.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.database import Database, open_project_database
from newsletter.database.enrolments import PAGE
from newsletter.errors import DatabaseError, NewsletterError
from newsletter.issues.sequencefiles import FOLDER, Sequence, Step, load_sequence, sequence_names
from newsletter.mail.tokens import SigningKey
from newsletter.models import DeliveryStatus
from newsletter.send.job import Delivered
from newsletter.sequences.quiet import quiet_for
from newsletter.sequences.steps import StepMails, deliver

Log = Callable[[str], None]
Clock = Callable[[], float]
FAULT_PAUSE = 5.0
LONGEST_WAIT = 60.0  # seconds a quiet duty sleeps at most: the quiet hours may be changed


class SequenceDuty:
    """Welcome sequences (start, run_once -> seconds until the next look, stop)."""

    name = "welcome sequences"

    def __init__(
        self,
        settings: Settings,
        key: SigningKey,
        owner: str,
        log: Log,
        *,
        clock: Clock = time.time,
    ) -> None:
        self.settings = settings
        self.key = key
        self.owner = owner
        self.log = log
        self.clock = clock
        self.database: Database | None = None
        self.mails = StepMails(settings, key)
        self._keys: dict[tuple[str, int], int] = {}
        self._faults: dict[str, str] = {}
        # Each sequence as last read: its files' stamp, the Sequence (None: it failed), the fault.
        self._read: dict[str, tuple[tuple[tuple[str, int, int], ...], Sequence | None, str]] = {}

    @property
    def folder(self) -> Path:
        return self.settings.resolve(Path(FOLDER))

    async def start(self) -> None:
        database = self._connect()
        if not database.shared:
            # SQLite allows one worker: a step's row left `sending` is a dead worker's upload.
            for step_key, list_name in database.enrolments.held():
                for row in database.deliveries.recover(step_key, list_name, keep=self.owner):
                    self.log(
                        f"sequence step {step_key} to {row.recipient} on {list_name}: unknown"
                        " (a worker stopped during its upload)"
                    )

    async def run_once(self) -> float:
        try:
            if self.database is None or self.database.broken:
                self._connect()
            return await self.look()
        except DatabaseError as exc:
            self.log(
                f"sequences: the outbox failed: {exc.message}; trying again in {FAULT_PAUSE:.0f} s"
            )
            return FAULT_PAUSE
        except NewsletterError as exc:
            # A step that cannot be rendered or sent now (a template's fault, the relay gone):
            # said, and tried again; the worker's other duties go on.
            self.log(f"sequences: {exc.message}; trying again in {FAULT_PAUSE:.0f} s")
            return FAULT_PAUSE

    async def stop(self) -> None:
        if self.database is not None:
            with contextlib.suppress(DatabaseError):
                self.database.close()

    async def look(self) -> float:
        """One look: due steps planned, then sent; seconds until the next is worth it."""
        database = self.database
        assert database is not None
        moment = self.clock()
        quiet = quiet_for(self.settings, moment)
        if quiet > 0:
            return min(quiet, LONGEST_WAIT)
        if database.shared:
            self.reap(database)
        sequences = self.sequences()
        steps: dict[int, Step] = {}
        for sequence in sequences:
            self.plan(database, sequence, moment, steps)
        for step_key, list_name in database.enrolments.waiting():
            step = steps.get(step_key)
            if step is None:
                if self._known(database, step_key):
                    database.enrolments.skip_removed(step_key, list_name)
                continue
            try:
                mail = self.mails.get(step, step_key, list_name)
            except (NewsletterError, OSError) as exc:
                self._fault(step.sequence, f"{step.name} for {list_name}: {exc}")
                continue
            self._said(step, list_name, await deliver(mail, database, self.settings))
        # A reader who confirms now gets step 1 at the next look, a poll away; a look that
        # finds nothing due reads a few index pages per step (benchmarks/sequences.py).
        return self.settings.worker.poll

    def _said(self, step: Step, list_name: str, done: Delivered) -> None:
        """What a step's send did, one line (nothing when nothing went: most looks)."""
        parts = [f"{done.this_run[s]} {s}" for s in DeliveryStatus if done.this_run.get(s)]
        if done.stopped:
            parts.append(f"stopped: {done.stopped}")
        if parts:
            self.log(f"sequence step {step.name} -> {list_name}: {', '.join(parts)}")

    def reap(self, database: Database) -> None:
        """PostgreSQL: the steps' rows of workers whose lease ran out (killed, cut off) come
        back, their uploads in flight `unknown`; else a dead worker's claimed rows, no longer
        free, would wait for ever (SQLite: `start` did it, one worker per project)."""
        for step_key, list_name in database.enrolments.held():
            for row in database.leases.reap(step_key, list_name):
                self.log(
                    f"sequence step {step_key} to {row.recipient} on {list_name}: unknown"
                    " (its worker stopped during the upload)"
                )

    def sequences(self) -> list[Sequence]:
        """Every sequence whose files load, read again only when a file of it changed; the
        faults of the others logged once each."""
        found = []
        names = sequence_names(self.folder)
        for name in names:
            stamp = _stamp(self.folder / name)
            kept = self._read.get(name)
            if kept is None or kept[0] != stamp:
                was = kept
                kept = (stamp, *self._load(name))
                self._read[name] = kept
                if was is not None and was[2] and not kept[2]:
                    # Said once, as the fault was: the editor sees the fix was picked up.
                    self.log(f"sequence {name}: its files read without a fault again")
            _, sequence, fault = kept
            if fault:
                self._fault(name, fault)
            else:
                self._faults.pop(name, None)
            if sequence is not None:
                found.append(sequence)
        for gone in set(self._read) - set(names):
            del self._read[gone]
        return found

    def _load(self, name: str) -> tuple[Sequence | None, str]:
        try:
            sequence = load_sequence(self.folder, name)
        except NewsletterError as exc:
            return None, str(exc)
        unknown = [x for x in sequence.lists if x not in self.settings.lists]
        if unknown:
            # Its steps still go to readers already in it; nobody new joins from those lists.
            return sequence, f"{FOLDER}/{name}: lists: {', '.join(unknown)} not in newsletter.toml"
        return sequence, ""

    def plan(
        self, database: Database, sequence: Sequence, moment: float, keys: dict[int, Step]
    ) -> None:
        """Each step's due readers planned, a page per transaction."""
        enrolments = database.enrolments
        previous = 0
        for step in sequence.steps:
            step_key = self.step_key(database, step)
            keys[step_key] = step
            while True:
                due = enrolments.due(
                    sequence.name,
                    previous,
                    step.number,
                    moment - step.after,
                    from_joining=step.from_joining,
                )
                if not due:
                    break
                mails = {x: self.mails.get(step, step_key, x) for x in {r.list for r in due}}
                ids = [mails[r.list].factory.message_id_of(r.address) for r in due]
                enrolments.plan(step_key, step.number, due, ids, moment)
                if len(due) < PAGE:
                    break
            previous = step.number

    def step_key(self, database: Database, step: Step) -> int:
        key = self._keys.get((step.sequence, step.number))
        if key is None:
            key = database.enrolments.step_key(step.sequence, step.number)
            self._keys[(step.sequence, step.number)] = key
        return key

    def _known(self, database: Database, step_key: int) -> bool:
        """A step key whose sequence still exists but no longer has the step (a sequence
        whose files fail to load keeps its rows waiting for the fix)."""
        found = database.enrolments.step_of(step_key)
        return found is not None and found[0] not in self._faults

    def _fault(self, name: str, message: str) -> None:
        if self._faults.get(name) != message:
            self._faults[name] = message
            self.log(f"sequence {name}: {message}")

    def _connect(self) -> Database:
        if self.database is not None:
            with contextlib.suppress(Exception):
                self.database.close()
        self.database = open_project_database(self.settings)
        return self.database


def _stamp(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Every file of a sequence (its steps, their images) by name, mtime and size."""
    found = []
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                stat = path.stat()
                found.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(sorted(found))
