"""A send, the one library call: a command's context, a SendRequest and a Listener in; a
SendOutcome out.

`newsletter send`, the worker's scheduled sends and a Python caller all send through `send`, in
the same fixed steps:

1. check: gate.inspect_send loads and renders the issue once and checks that draft; its errors
   refuse the send (CheckFailedError, nothing planned) unless `force`;
2. a staging list's test: testsend.consider decides whether it goes out again (unchanged and
   finished: nothing is sent, and the outcome says so);
3. prepare: the message factory is built from the checked draft, not from the file, so an edit
   saved while the checks ran or while the question waits goes out with the next send only;
   A request's `phase` may then reshape it (a subject test: its sample now, its rest later);
4. ask: a real list's send asks the Listener when the request says so (declined: nothing sent);
5. run: what a real list gets is recorded once (the delivery log's sent_issues: `check`,
   `send` and `diff` then say when the file no longer is what readers have), and the
   coordinator plans, delivers and records, each outcome passed to the Listener.

Nothing here prints, asks a terminal or exits: each step's value goes to the Listener as it is
known (the command line words them, the worker's child prints them plainly), and the outcome,
with its exit code, is returned. A fault of the delivery log under the run is a value too (a
stopped run, which the re-run recovers as after a kill).

Every step reads and writes the database through the command's context (context.py): one
connection for the whole send in this process, opened by the first step that needs it and
created only once the send runs (a refused or declined first send leaves no log behind).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from newsletter.config.settings import DEFAULT_LIST
from newsletter.context import CommandContext
from newsletter.database import Database
from newsletter.errors import CheckFailedError, DatabaseError
from newsletter.gate import SendVerdict, inspect_send
from newsletter.review.compare import recorded, version_of
from newsletter.send import coordinator, preparation
from newsletter.send.job import Event, Options, RunReport
from newsletter.send.preparation import Prepared
from newsletter.send.testsend import TestDecision, consider

__all__ = [
    "EXIT_DONE",
    "EXIT_INCOMPLETE",
    "EXIT_REFUSED",
    "EXIT_STOPPED",
    "Listener",
    "Phase",
    "Quiet",
    "SendOutcome",
    "SendRequest",
    "send",
]

# A phase of a larger send that reshapes what was prepared (subjects/run.py: a subject test's
# sample, or its rest once decided): the prepared send and the command's database in; this
# run's, and a line saying which ('' when there is no such phase), out.
Phase = Callable[[Prepared, Database], tuple[Prepared, str]]

EXIT_DONE = 0
EXIT_REFUSED = 1  # an error before sending (the checks, the list, a declined question)
EXIT_INCOMPLETE = 3
EXIT_STOPPED = 4


@dataclass(frozen=True)
class SendRequest:
    """One send asked for: an issue to a list, and how."""

    number: int
    list_name: str = DEFAULT_LIST
    force: bool = False  # send despite the checks' errors
    again: bool = False  # a staging list: send the test again, changed or not
    online: bool | None = None  # the online checks: None takes [check] online
    ask: bool = False  # a real list: ask the Listener before anything goes out
    options: Options | None = None  # None: [send] and [bounces] as configured
    phase: Phase | None = None  # e.g. a subject test's (subjects/run.py), applied once prepared


@dataclass(frozen=True)
class SendOutcome:
    """How a send ended: the checks' verdict, the test decision (a staging list), the run's
    report (None: nothing ran), and whether the question was declined or the log failed."""

    verdict: SendVerdict
    test: TestDecision | None = None
    report: RunReport | None = None
    declined: bool = False
    fault: DatabaseError | None = None  # the log failed under the run: stopped, re-run resumes

    @property
    def exit_code(self) -> int:
        """The one mapping of a send's end to `newsletter send`'s exit code: 0 complete (or a
        test unchanged), 1 declined, 3 finished with recipients not sent, 4 stopped."""
        if self.fault is not None:
            return EXIT_STOPPED
        if self.declined:
            return EXIT_REFUSED
        if self.report is None:
            return EXIT_DONE
        if self.report.stopped:
            return EXIT_STOPPED
        return EXIT_DONE if self.report.complete else EXIT_INCOMPLETE


class Listener(Protocol):
    """What a send tells its caller as it goes, and the one thing it asks."""

    def checked(self, verdict: SendVerdict) -> None:
        """The checks' verdict, before anything else (errors refuse right after, unless force)."""

    def tested(self, decision: TestDecision) -> None:
        """A staging list's test decision (its `message` says why it goes or not)."""

    def phased(self, line: str) -> None:
        """Which phase of a larger send this run is (a subject test's sample, or its rest)."""

    def notice(self, line: str) -> None:
        """A warning about how it will be sent (e.g. TLS not verified)."""

    def confirm(self, verdict: SendVerdict, prepared: Prepared) -> bool:
        """A real list, asked for: send now? (`prepared.survey()` counts the recipients.)"""

    def running(self, prepared: Prepared) -> AbstractContextManager[Callable[[Event], None]]:
        """The run's progress: entered when it starts, called once per recorded outcome."""


class Quiet:
    """A Listener for Python callers that need none: says nothing, answers yes."""

    def checked(self, verdict: SendVerdict) -> None:
        pass

    def tested(self, decision: TestDecision) -> None:
        pass

    def phased(self, line: str) -> None:
        pass

    def notice(self, line: str) -> None:
        pass

    def confirm(self, verdict: SendVerdict, prepared: Prepared) -> bool:
        return True

    @contextlib.contextmanager
    def running(self, prepared: Prepared) -> Iterator[Callable[[Event], None]]:
        yield lambda event: None


def send(
    context: CommandContext, request: SendRequest, listener: Listener | None = None
) -> SendOutcome:
    """Check, decide a test, prepare from what was checked, ask, run (module docstring).
    Raises CheckFailedError on the checks' errors (unless `force`) and what loading the issue
    or the list raises, all before anything is planned."""
    heard = listener if listener is not None else Quiet()
    settings = context.settings
    number, list_name = request.number, request.list_name
    staging = settings.mailing_list(list_name).staging
    verdict = inspect_send(context, number, list_name, online=request.online, sending=True)
    heard.checked(verdict)
    if verdict.errors and not request.force:
        raise CheckFailedError(
            f"refusing to send issue {number} to the {list_name!r} list: `check` found"
            f" {len(verdict.errors)} error(s), above; nothing was planned or sent"
        )
    test = None
    if staging:
        test = consider(
            context.existing_database(),
            number,
            list_name,
            verdict.fingerprint,
            again=request.again,
            timezone=settings.newsletter.timezone,
        )
        heard.tested(test)
        if not test.go:
            return SendOutcome(verdict, test)
    prepared = preparation.prepare(
        settings, verdict.draft, list_name, context.existing_database(), test=test
    )
    if request.phase is not None:
        prepared, line = request.phase(prepared, context.database)
        if line:
            heard.phased(line)
    if settings.smtp.security != "none" and not settings.smtp.verify:
        heard.notice(
            "warning: [smtp] verify = false: the server's TLS certificate is not checked, so "
            "whoever sits between here and the server can read and change every message"
        )
    if request.ask and not staging and not heard.confirm(verdict, prepared):
        return SendOutcome(verdict, test, declined=True)
    options = request.options if request.options is not None else Options.merged(settings)
    try:
        if not staging:
            version = version_of(verdict.draft, settings, "sent", settings.root)
            context.database.sent_issues.record(
                number, list_name, verdict.fingerprint, recorded(version)
            )
        with heard.running(prepared) as progress:
            report = coordinator.send(prepared, context.database, options, progress)
    except DatabaseError as exc:
        # The log failed under the run (its disk full, locked, damaged, its connection lost).
        return SendOutcome(verdict, test, fault=exc)
    return SendOutcome(verdict, test, report)
