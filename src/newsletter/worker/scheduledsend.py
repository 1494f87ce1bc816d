"""A scheduled send's own process: the config, an (issue, list) and the options the schedule
kept in; the send run through the library call (send/pipeline.py), its lines on stdout and its
exit code out.

The worker starts this module (through schedule/launch.py's relay), not the `newsletter` command
line:
the same call as `newsletter send --yes`, the same checks, lock, leases, in-doubt protocol and
exit codes, with nothing of the command line between. It is a process of its own, not a call in
the worker, so that a worker killed with -9 leaves a send that stops as after Ctrl-C (its
uploads finished and recorded; launch.py says how), and so that the send's memory and signal
handlers are its own. Its lines are the worker's log: the checks' findings, the summary, and on
a stop or an error the `stopped:`/`error:` line with its `hint:` (launch.Finished reads them).
Two lines are values for the worker (launch.py's): the check's refusal, and a warm-up pause's
end.

The send's own check is the only one a scheduled send gets (the worker starts this process
without checking first: one load, one render): an issue that fails it now, or no longer loads,
is said on the `check-refused:` line, and the worker records the schedule `failed`.

A stopping worker's SIGTERM may come while the checks run (SpamAssassin, the online checks take
seconds), before the coordinator handles signals: it stops the send there, said as a stop with
exit code 4, so the worker hands the schedule back for the next worker, as it does for a SIGTERM
during the run (the default action, death by signal, read as a send killed and left `stopped`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from newsletter.api import Project
from newsletter.checks.findingformats import text_line
from newsletter.config.settings import load_settings
from newsletter.errors import CheckFailedError, NewsletterError
from newsletter.gate import SendVerdict
from newsletter.models import DeliveryStatus
from newsletter.schedule.booking import send_refusal
from newsletter.schedule.launch import check_refused_line, resume_line
from newsletter.send import pipeline
from newsletter.send.coordinator import Interrupted, Interrupts
from newsletter.send.job import Event, Options, progress_line
from newsletter.send.preparation import Prepared
from newsletter.send.testsend import TestDecision


def command(config: Path | None, issue: int, list_name: str, options: list[str]) -> list[str]:
    """This module run with this interpreter for (issue, list); `options` are those the
    schedule kept (`--rate R`, `--concurrency C`)."""
    head = [sys.executable, "-m", __name__, "--issue", str(issue), "--list", list_name]
    if config is not None:
        head += ["--config", str(config.resolve())]
    return [*head, *options]


PROGRESS_EVERY = 5.0  # seconds between two progress lines, as `newsletter send` off a terminal


class Lines:
    """The send's Listener as a log: one plain line per thing worth keeping, and the run's
    progress every PROGRESS_EVERY seconds (a long send is not silent in the worker's log)."""

    def __init__(
        self, label: str, interrupts: Interrupts | None = None, *, every: float = PROGRESS_EVERY
    ) -> None:
        self.label = label
        self.interrupts = interrupts  # raising until the run's own take over
        self.every = every
        self.started = self.last_line = time.monotonic()
        self.sent = 0
        self.verdict: SendVerdict | None = None  # None: the check has not ended

    def checked(self, verdict: SendVerdict) -> None:
        self.verdict = verdict
        for finding in verdict.findings:
            say(text_line(finding))
        if verdict.online is not None and verdict.online.skipped:
            # `newsletter send` said it: a send that went out unchecked online says so.
            say(verdict.online.summary())
        say(f"check: issue {verdict.number}: {verdict.tally()}")

    def tested(self, decision: TestDecision) -> None:
        if decision.message:
            say(f"{self.label}: {decision.message}")

    def phased(self, line: str) -> None:
        say(line)

    def notice(self, line: str) -> None:
        say(line)

    def confirm(self, verdict: SendVerdict, prepared: Prepared) -> bool:
        return True  # a scheduled send was confirmed when it was booked

    @contextlib.contextmanager
    def running(self, prepared: Prepared) -> Iterator[Callable[[Event], None]]:
        if self.interrupts is not None:
            # The coordinator handles signals from here; after it, the send is retiring.
            self.interrupts.raising = False
        self.started = self.last_line = time.monotonic()
        yield self._event

    def _event(self, event: Event) -> None:
        if event.state == DeliveryStatus.SENT:
            self.sent += 1
        else:
            reply = event.result.describe() if event.result else ""
            say(f"{event.state}: {event.recipient} {reply}")
        now = time.monotonic()
        if now - self.last_line >= self.every:
            self.last_line = now
            rate = self.sent / max(now - self.started, 1e-3)
            say(progress_line(self.label, event.counts, rate))


def say(line: str) -> None:
    print(line.replace("\r", " ").replace("\n", " "), flush=True)


def run(argv: list[str]) -> int:
    """Parse `argv`, send, say how it ended; the exit code (pipeline's)."""
    parser = argparse.ArgumentParser(prog=__name__)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--issue", type=int, required=True)
    parser.add_argument("--list", dest="list_name", required=True)
    parser.add_argument("--rate", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=None)
    args = parser.parse_args(argv)
    label = f"issue {args.issue} -> {args.list_name}"
    lines: Lines | None = None  # made once the settings are read: the check comes next
    try:
        with Interrupts() as interrupts:
            settings = load_settings(args.config)
            options = Options.merged(settings, rate=args.rate, concurrency=args.concurrency)
            lines = Lines(label, interrupts)
            # A process of its own, so a connection of its own: the worker's is the worker's.
            with Project(settings) as project:
                outcome = project.send(args.issue, args.list_name, options=options, listener=lines)
    except Interrupted as stop:
        say(f"stopped: stopped by {stop.name} before sending (nothing was sent)")
        say("hint: Re-run the same command to resume.")
        return pipeline.EXIT_STOPPED
    except NewsletterError as exc:
        if lines is not None and (lines.verdict is None or isinstance(exc, CheckFailedError)):
            refusal = exc.message  # the file is gone, or does not load
            if lines.verdict is not None:
                refusal = send_refusal(list(lines.verdict.findings)) or refusal
            say(check_refused_line(refusal))
        return failed(exc, pipeline.EXIT_REFUSED)
    if outcome.fault is not None:
        return failed(outcome.fault, outcome.exit_code)
    report = outcome.report
    if report is not None:
        # The list's rejected rows, as `newsletter send` names them (if this process planned).
        if report.list_report is not None:
            for line in report.list_report.skipped_lines():
                say(line)
        for line in report.summary().split("\n"):
            say(line)
        if report.stopped:
            say(f"stopped: {report.stopped}")
            say("hint: Re-run the same command to resume.")
        if report.resumes_at is not None:  # the warm-up's pause: the worker postpones to it
            say(resume_line(report.resumes_at))
    return outcome.exit_code


def failed(exc: NewsletterError, code: int) -> int:
    say(f"error: {exc.message}")
    if exc.hint:
        say(f"hint: {exc.hint}")
    return code


if __name__ == "__main__":
    code = run(sys.argv[1:])
    with contextlib.suppress(OSError):
        sys.stdout.flush()
    os._exit(code)  # as the console script: nothing left to tear down object by object
