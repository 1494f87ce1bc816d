"""Booking a scheduled send: a command's context, an issue, a list and the editor's time in; the
schedule recorded in the outbox out, or a ScheduleError saying why not.

Each refusal is a named step, in order: the list must exist, the time must name one instant
(when.py) still to come, the issue must pass `check` (offline; the send checks it again when the
worker starts it, and `send_refusal` words both refusals), and no other schedule of the same
send (issue and list) may wait or run.
"""

from __future__ import annotations

import getpass
import socket
import time
from dataclasses import dataclass

from newsletter.checks.lint import Finding
from newsletter.context import CommandContext
from newsletter.database.schedules import Schedule
from newsletter.errors import ScheduleError
from newsletter.gate import inspect_send
from newsletter.schedule.when import Moment, check_future, describe_instant, parse_moment


@dataclass(frozen=True)
class Booked:
    schedule: Schedule
    warnings: list[Finding]  # what check warned of (shown, not refused)


def send_refusal(findings: list[Finding]) -> str | None:
    """Why the findings stop a send (their errors, one a line), or None."""
    errors = [str(f) for f in findings if f.level == "error"]
    if not errors:
        return None
    return f"{len(errors)} check error(s):\n" + "\n".join(errors)


def booked_by() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


def book_send(
    context: CommandContext,
    number: int,
    list_name: str,
    at: str,
    zone_name: str | None,
    *,
    now: float | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
) -> Booked:
    """The send of issue `number` to `list_name` scheduled for `at` (in `zone_name`, else
    `[newsletter] timezone`, else the machine's zone), to run with `rate` and `concurrency`
    (None: newsletter.toml's at the time)."""
    settings = context.settings
    settings.mailing_list(list_name)  # an unknown list names the ones there are
    clock = time.time() if now is None else now
    moment: Moment = parse_moment(at, zone_name or settings.newsletter.timezone or None, now=clock)
    check_future(moment, clock)
    findings = list(inspect_send(context, number, list_name, sending=True).findings)
    refused = send_refusal(findings)
    if refused is not None:
        raise ScheduleError(
            f"issue {number} fails `newsletter check`, so it is not scheduled: {refused}",
            hint=f"Fix the issue file, run `newsletter check --issue {number}`, then schedule"
            " it again.",
        )
    schedules = context.database.schedules
    schedule = schedules.book(
        number,
        list_name,
        moment.timestamp,
        moment.zone,
        booked_by(),
        rate=rate,
        concurrency=concurrency,
    )
    if schedule is None:
        other = schedules.pending(number, list_name)
        when = describe_instant(other.due_at, other.zone) if other else "already"
        state = other.state.value if other else "waiting"
        raise ScheduleError(
            f"issue {number} to {list_name!r} is already scheduled ({state}, {when})",
            hint=f"One schedule per send: `newsletter schedule cancel --issue {number}"
            f" --list {list_name}` first to move it.",
        )
    return Booked(schedule, [f for f in findings if f.level == "warning"])
