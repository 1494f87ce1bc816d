"""The worker's duty of scheduled sends: the settings and the outbox's schedules in; each due send
started by exactly one worker, re-checked first, its outcome recorded, out.

Each look, in order: schedules that never started and are now past `[schedule] grace` are `missed`
(reported, never sent: news that is a day late is not what the editor scheduled); then every due
schedule is claimed under a lease (PostgreSQL: SKIP LOCKED, so of any number of workers exactly one
takes it; a claim whose lease ran out, its worker dead, is taken again and the send resumed); each
claimed one runs through the library's send call in a process of its own (scheduledsend.py, which
the worker names, started by launch.py), the lease renewed while it does. That send checks the
issue as `newsletter check` does, once: the worker does not check it first (a second load and
render), and an issue the send's check refuses is `failed` with the errors it names. A send the
editor began by hand comes first (byhand.py): while it runs the schedule stays open for the next
look; once it ran to its end the schedule is done, and nothing is started. A stopping worker
(SIGTERM) passes the signal to its sends, which finish their uploads and stop, and hands their
schedules back for the next worker to resume; a send the warm-up's daily cap paused is due again
at the time the send gave.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.database import Database, open_project_database
from newsletter.database.schedules import Schedule, Schedules, ScheduleState, kept_options
from newsletter.errors import DatabaseError
from newsletter.schedule.byhand import finished_send, running_send
from newsletter.schedule.launch import Finished, SendProcess
from newsletter.schedule.when import describe_instant, span
from newsletter.send.pipeline import EXIT_INCOMPLETE, EXIT_REFUSED, EXIT_STOPPED

Log = Callable[[str], None]
# The command that runs one due send in a process of its own: the config, the issue, the list
# and the options the schedule kept in (the worker gives scheduledsend.command).
SendCommand = Callable[[Path | None, int, str, list[str]], list[str]]
FAULT_PAUSE = 5.0


class ScheduleDuty:
    """Scheduled sends (start, run_once -> seconds until the next look, stop)."""

    name = "scheduled sends"

    def __init__(
        self,
        settings: Settings,
        owner: str,
        log: Log,
        command: SendCommand,
        *,
        config: Path | None = None,
        once: bool = False,
    ) -> None:
        self.settings = settings
        self.owner = owner
        self.log = log
        self.command = command
        self.config = config
        self.once = once
        self.database: Database | None = None
        self.schedules: Schedules | None = None
        self.running: dict[int, asyncio.Task[None]] = {}
        self.sends: dict[int, SendProcess] = {}
        self.stopping = False
        self._renewing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        schedules = self._connect()
        if self.database is not None and not self.database.shared:
            # SQLite allows one worker: a schedule another one held is a dead worker's.
            schedules.release_others(self.owner)
        self._renewing = asyncio.create_task(self._renew())

    async def run_once(self) -> float:
        poll = self.settings.worker.poll
        try:
            if self.database is None or self.database.broken:
                self._connect()
            assert self.schedules is not None
            self._miss(self.schedules)
            while not self.stopping and (
                claimed := self.schedules.claim(self.owner, self.settings.worker.lease)
            ):
                self.running[claimed.id] = asyncio.create_task(self._run(claimed))
            wait = self.schedules.next_due()
        except DatabaseError as exc:
            self.log(f"scheduled sends: the outbox failed: {exc.message}; again in 5 s")
            return FAULT_PAUSE
        if self.once and self.running:
            await asyncio.gather(*self.running.values(), return_exceptions=True)
        return poll if wait is None else min(poll, wait)

    async def stop(self) -> None:
        """Every send this worker runs is told to stop (SIGTERM: its uploads finish and are
        recorded), and its schedule handed back once it has."""
        self.stopping = True
        for send in list(self.sends.values()):
            send.stop()
        if self.running:
            await asyncio.gather(*self.running.values(), return_exceptions=True)
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
        if self.database is not None:
            with contextlib.suppress(DatabaseError):
                self.database.close()

    def _miss(self, schedules: Schedules) -> None:
        grace = self.settings.schedule.grace
        reason = (
            f"not sent: no worker ran within [schedule] grace ({span(grace)}) after its time;"
            " send it by hand (`newsletter send`) or schedule it again"
        )
        for missed in schedules.miss(grace, reason):
            self.log(f"{_label(missed)}: missed: {reason}")

    async def _run(self, schedule: Schedule) -> None:
        try:
            await self._start(schedule)
        except DatabaseError as exc:
            # The claim stays until its lease runs out; then a worker (this one too) resumes.
            self.log(f"{_label(schedule)}: the outbox failed: {exc.message}")
        except Exception as exc:  # e.g. no process could be started: said, not left claimed
            outcome = f"the worker could not start the send: {type(exc).__name__}: {exc}"
            self.log(f"{_label(schedule)}: failed: {outcome}")
            with contextlib.suppress(DatabaseError):
                assert self.schedules is not None
                self.schedules.finish(schedule.id, self.owner, ScheduleState.FAILED, outcome)
        finally:
            self.running.pop(schedule.id, None)
            self.sends.pop(schedule.id, None)

    async def _start(self, schedule: Schedule) -> None:
        label = _label(schedule)
        assert self.schedules is not None
        if self._sent_by_hand(schedule):
            return
        verb = "resuming" if schedule.started_at else "starting"
        self.log(
            f"{label}: due {describe_instant(schedule.due_at, schedule.zone)}: checking the issue"
            " (the send's own check)"
        )
        if self.stopping:
            self.schedules.release(schedule.id, self.owner)
            return
        if not self.schedules.launched(schedule.id, self.owner):
            self.log(f"{label}: no longer this worker's (its lease ran out): left to the other")
            return
        options = kept_options(schedule)
        shown = f" with {' '.join(options)}" if options else ""
        self.log(f"{label}: {verb} the send (worker {self.owner}){shown}")
        command = self.command(self.config, schedule.issue, schedule.list, options)
        send = await SendProcess.start(command, self.log, f"{label}: ")
        self.sends[schedule.id] = send
        if self.stopping:  # SIGTERM came while it started
            send.stop()
        finished = await send.wait()
        if finished.code == EXIT_REFUSED and self._sent_by_hand(schedule):
            return  # the editor's send took the lock while this one started
        self._record(schedule, finished, send.signalled)

    def _sent_by_hand(self, schedule: Schedule) -> bool:
        """A send of the schedule's (issue, list) that the editor started by hand (byhand.py):
        still running, the schedule is handed back open for the next look; run to its end,
        the schedule is done. True when either, and the schedule was dealt with."""
        assert self.database is not None
        assert self.schedules is not None
        label, issue, name = _label(schedule), schedule.issue, schedule.list
        running = running_send(self.settings, self.database, issue, name)
        if running is not None:
            outcome = f"waiting: {running}; tried again on the next look"
            released = self.schedules.release(schedule.id, self.owner, outcome)
            if released and outcome != schedule.outcome:  # said once, not at every look
                self.log(f"{label}: {outcome}")
            return True
        finished = finished_send(self.settings, self.database, issue, name)
        if finished is None:
            return False
        how = (
            "sent by hand before its time"
            if schedule.started_at is None
            else "sent already (by hand, or by its earlier start)"
        )
        outcome = f"{how}: issue {issue} -> {name}: {finished}; nothing started"
        if self.schedules.finish(schedule.id, self.owner, ScheduleState.DONE, outcome):
            self.log(f"{label}: done: {outcome}")
        return True

    def _record(self, schedule: Schedule, finished: Finished, signalled: bool) -> None:
        assert self.schedules is not None
        label, code = _label(schedule), finished.code
        if code == EXIT_STOPPED and signalled:
            outcome = f"handed back: worker {self.owner} stopped during the send"
            self.schedules.release(schedule.id, self.owner, outcome)
            self.log(f"{label}: {outcome}; the next worker resumes it")
            return
        if code == EXIT_STOPPED and finished.resume_at is not None:  # the warm-up's next day
            outcome = f"{finished.error()} (the worker resumes it then)"
            if self.schedules.postpone(schedule.id, self.owner, finished.resume_at, outcome):
                self.log(f"{label}: {outcome}")
            return
        if code == EXIT_REFUSED and finished.check_refused is not None:
            outcome = f"not sent: the issue fails `newsletter check` now: {finished.check_refused}"
            self.schedules.refuse(schedule, self.owner, outcome)
            self.log(f"{label}: {outcome}")
            return
        if code in (0, EXIT_INCOMPLETE):
            state, outcome = ScheduleState.DONE, finished.summary()
            if code == EXIT_INCOMPLETE:
                outcome += (
                    f"; not every recipient was sent: `newsletter status --issue"
                    f" {schedule.issue} --list {schedule.list}`"
                )
        elif code == EXIT_STOPPED:
            state, outcome = (
                ScheduleState.STOPPED,
                (
                    f"{finished.error()} (resume: `newsletter send --issue {schedule.issue}"
                    f" --list {schedule.list}`)"
                ),
            )
        elif code < 0:
            state, outcome = (
                ScheduleState.STOPPED,
                (
                    f"the send process was killed (signal {-code}); resume: `newsletter send"
                    f" --issue {schedule.issue} --list {schedule.list}`"
                ),
            )
        else:
            state, outcome = ScheduleState.FAILED, f"the send refused: {finished.error()}"
        if not self.schedules.finish(schedule.id, self.owner, state, outcome):
            self.log(f"{label}: no longer this worker's; its outcome was not recorded")
        self.log(f"{label}: {state.value}: {outcome}")

    async def _renew(self) -> None:
        """The claims kept alive while the sends run, a third of the lease apart."""
        while True:
            await asyncio.sleep(self.settings.worker.lease / 3)
            if self.schedules is None or self.database is None or self.database.broken:
                continue
            with contextlib.suppress(DatabaseError):
                self.schedules.renew(self.owner, self.settings.worker.lease)

    def _connect(self) -> Schedules:
        if self.database is not None:
            with contextlib.suppress(Exception):
                self.database.close()
        self.database = open_project_database(self.settings)
        self.schedules = self.database.schedules
        return self.schedules


def _label(schedule: Schedule) -> str:
    return f"issue {schedule.issue} -> {schedule.list}"
