"""The library: a project's config in; its issues, renders, checks, sends, schedules, status and
click reports out, each one call.

    from newsletter import Project

    project = Project.open("newsletter.toml")
    verdict = project.check(15)                     # what `newsletter check` finds
    outcome = project.send(15, "staging")           # a test send
    outcome = project.send(15)                      # every reader of the main list, once
    print(outcome.report.summary() if outcome.report else outcome.test)

`newsletter send` and the worker's scheduled sends make the same send call (send/pipeline.py);
the command line adds the words, the progress bar and the question. Nothing here prints.

Each call is a command with its own context (context.py): the project's database opened once,
when first needed, and closed when the call returns. Inside `with project:` the calls share
one context, so the whole block opens the database once (the command line's way):

    with Project.open("newsletter.toml") as project:
        project.send(15)
        print(project.status(15))
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from newsletter.config.settings import DEFAULT_LIST, Settings, load_settings
from newsletter.context import CommandContext
from newsletter.draft import dated_for_sending
from newsletter.errors import ConfigError
from newsletter.gate import SendVerdict, inspect_send
from newsletter.issues import load_issue
from newsletter.models import DeliveryStatus, Issue, RenderedEmail
from newsletter.rendering.render import render_issue
from newsletter.schedule.booking import Booked, book_send
from newsletter.send import pipeline
from newsletter.send.job import Options
from newsletter.send.pipeline import Listener, SendOutcome, SendRequest
from newsletter.subjects.run import SubjectRequest, subject_phase

if TYPE_CHECKING:
    from newsletter.clicks.report import ClickReport

__all__ = ["Project"]


class Project:
    """One newsletter project: its settings, and every use case as a method."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # `with project:`'s context, shared by the calls in the block (one thread at a time, as
        # one connection is), and how deep the blocks are nested: the outermost one closes it.
        self._held: CommandContext | None = None
        self._depth = 0

    def __enter__(self) -> Self:
        if self._held is None:
            self._held = CommandContext(self.settings)
        self._depth += 1
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        if self._depth:
            return
        held, self._held = self._held, None
        if held is not None:
            held.__exit__(et, ev, tb)

    @contextmanager
    def _command(self) -> Iterator[CommandContext]:
        """The context a call runs in: `with project:`'s, else one of its own, closed (its
        database with it) when the call returns."""
        if self._held is not None:
            yield self._held
            return
        with CommandContext(self.settings) as context:
            yield context

    @classmethod
    def open(cls, config: str | Path | None = None) -> Project:
        """The project of `config` (default: ./newsletter.toml; its folder is the root), with
        the environment over it as on the command line. Raises ConfigError naming the line."""
        return cls(load_settings(Path(config) if config is not None else None))

    def issue(self, number: int) -> Issue:
        """Issue `number` as its file says (IssueError names the file's lines)."""
        return load_issue(self.settings.issues_dir, number)

    def render(self, number: int) -> RenderedEmail:
        """Issue `number` as email (HTML and text), dated as a send now would date it."""
        issue = self.issue(number)
        with self._command() as context:
            dated = dated_for_sending(self.settings, issue, context.first_sent())
        return render_issue(dated, self.settings)

    def check(
        self, number: int, list_name: str = DEFAULT_LIST, *, online: bool | None = None
    ) -> SendVerdict:
        """`newsletter check`: the findings on the message `list_name` would get, its size and
        spam score (online checks too with `online`, or as [check] online says)."""
        with self._command() as context:
            return inspect_send(context, number, list_name, online=online)

    def send(
        self,
        number: int,
        list_name: str = DEFAULT_LIST,
        *,
        force: bool = False,
        again: bool = False,
        online: bool | None = None,
        ask: bool = False,
        options: Options | None = None,
        listener: Listener | None = None,
        subjects: SubjectRequest | None = None,
    ) -> SendOutcome:
        """Send issue `number` to `list_name` now, exactly once per reader: checked first
        (CheckFailedError on errors unless `force`), a staging list's test only when the message
        changed (or `again`), re-running resumes. `listener` hears each step (default: none)
        and, with `ask`, is asked before a real list goes out. `subjects` begins a subject test
        (its sample now); a send whose subject test is decided sends the rest the winner.

        `newsletter send` and the worker's scheduled sends are this call."""
        request = SendRequest(
            number,
            list_name,
            force=force,
            again=again,
            online=online,
            ask=ask,
            options=options,
            phase=lambda prepared, database: subject_phase(
                prepared, database, subjects, time.time()
            ),
        )
        with self._command() as context:
            return pipeline.send(context, request, listener)

    def schedule(
        self,
        number: int,
        at: str,
        list_name: str = DEFAULT_LIST,
        *,
        zone: str | None = None,
        rate: float | None = None,
        concurrency: int | None = None,
    ) -> Booked:
        """`send --at`: checked now, booked for `at` (e.g. "tomorrow 08:00", in `zone`), sent
        then by `newsletter worker`. Raises ScheduleError when it cannot be booked."""
        with self._command() as context:
            return book_send(
                context, number, list_name, at, zone, rate=rate, concurrency=concurrency
            )

    def status(self, number: int, list_name: str = DEFAULT_LIST) -> dict[DeliveryStatus, int]:
        """How many of the list's rows are in each state for the issue (none sent yet: zeros)."""
        with self._command() as context:
            database = context.existing_database()
            if database is None:
                return dict.fromkeys(DeliveryStatus, 0)
            return database.deliveries.counts(number, list_name)

    def report(self, number: int, list_name: str = DEFAULT_LIST) -> ClickReport:
        """`newsletter report`: what people (not scanners) clicked, by item; needs a send."""
        # Imported here: the click machinery (tokens, agent rules) is no part of a send's start.
        from newsletter.clicks.gather import gather_report

        with self._command() as context:
            database = context.existing_database()
            if database is None:
                raise ConfigError(
                    f"issue {number} has not been sent: there is no delivery log yet",
                    hint=f"Send it first: `newsletter send --issue {number}`.",
                )
            return gather_report(database, self.settings, self.issue(number), list_name)
