"""The editor's side of welcome sequences: the settings and the outbox in; each sequence's steps,
how many readers are at each, what the delivery log holds per step and when the next step falls
due (`newsletter sequences`) out; and the editor's enrolment of a whole list.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from newsletter.checks.lint import Finding
from newsletter.config.settings import Settings
from newsletter.database import STEP_KEYS, Database
from newsletter.draft import review
from newsletter.errors import IssueError, Problem
from newsletter.issues import load_issue
from newsletter.issues.sequencefiles import (
    FOLDER,
    Sequence,
    Step,
    load_sequence,
    sequence_names,
)
from newsletter.models import DeliveryStatus, Issue

S = DeliveryStatus


@dataclass(frozen=True)
class StepView:
    number: int
    name: str  # NN-slug
    title: str
    after: float
    from_joining: bool
    key: int  # the step's issue number in the delivery log (`status --issue KEY`)
    at_step: int  # readers whose last step is this one
    waiting: int  # readers this step is next for (and would reach: confirmed, not suppressed)
    next_due: float | None  # when it next falls due for one of them (Unix time)
    counts: dict[DeliveryStatus, int] = field(default_factory=dict)  # the log, readers' lists
    tests: dict[DeliveryStatus, int] = field(default_factory=dict)  # the log, staging lists


@dataclass(frozen=True)
class SequenceView:
    name: str
    lists: tuple[str, ...]
    steps: tuple[StepView, ...]
    joined: int  # readers in it, wherever they are
    not_started: int  # those of them who had no step yet


def survey(settings: Settings, database: Database) -> list[SequenceView]:
    """Every sequence as the editor sees it (IssueError for a faulty one)."""
    folder = settings.resolve(Path(FOLDER))
    staging = {name for name, chosen in settings.lists.items() if chosen.staging}
    return [view(load_sequence(folder, name), database, staging) for name in sequence_names(folder)]


def view(sequence: Sequence, database: Database, staging: Collection[str] = ()) -> SequenceView:
    """The sequence's steps and readers; `staging`: the lists whose rows are step tests
    (`sequences test`), counted apart from what went to readers."""
    enrolments = database.enrolments
    at_steps = enrolments.at_steps(sequence.name)
    reachable = enrolments.at_steps(sequence.name, reachable=True)
    steps = []
    previous = 0
    for step in sequence.steps:
        key = enrolments.step_key(sequence.name, step.number)
        waiting = sum(n for at, n in reachable.items() if previous <= at < step.number)
        first = enrolments.next_at(
            sequence.name, previous, step.number, from_joining=step.from_joining
        )
        counts = dict.fromkeys(DeliveryStatus, 0)
        tests = dict.fromkeys(DeliveryStatus, 0)
        for list_name in database.deliveries.lists_of(key):
            into = tests if list_name in staging else counts
            for state, n in database.deliveries.counts(key, list_name).items():
                into[state] += n
        steps.append(
            StepView(
                step.number,
                f"{step.number:02d}-{step.slug}",
                step.issue.title,
                step.after,
                step.from_joining,
                key,
                at_steps.get(step.number, 0),
                waiting,
                None if first is None else first + step.after,
                counts,
                tests,
            )
        )
        previous = step.number
    return SequenceView(
        sequence.name,
        sequence.lists,
        tuple(steps),
        sum(at_steps.values()),
        at_steps.get(0, 0),
    )


def enrol(folder: Path, database: Database, name: str, list_name: str, at: float) -> int:
    """Every confirmed reader of `list_name` joins sequence `name` at step 1 (those in it
    already stay where they are); how many joined. A faulty or missing sequence is named
    before anyone joins."""
    load_sequence(folder, name)
    return database.enrolments.enrol_list(name, list_name, at)


def issue_of(settings: Settings, database: Database | None, number: int) -> Issue:
    """The issue `number` names in the delivery log (`database`, None when there is none yet):
    an issue file, or (a step's key, as `newsletter sequences` shows it) the step as the worker
    sends it, numbered by its key."""
    if number < STEP_KEYS:
        return load_issue(settings.issues_dir, number)
    found = None if database is None else database.enrolments.step_of(number)
    if found is None:
        raise IssueError(
            [Problem(FOLDER, None, "", f"no sequence step has the key {number}")],
            hint="`newsletter sequences` shows each step's key.",
        )
    sequence, step = found
    issue = load_sequence(settings.resolve(Path(FOLDER)), sequence).step(step).issue
    return issue.model_copy(update={"number": number})


def check_sequence(
    settings: Settings, name: str, list_name: str, dates: Mapping[int, dt.date]
) -> list[tuple[Step, list[Finding]]]:
    """Each step of sequence `name` checked as `check` checks an issue: its findings (those
    its `silence:` holds back left out). `dates`: draft.sent_dates, read once for every step
    (each step's review would otherwise open the database for them)."""
    sequence = load_sequence(settings.resolve(Path(FOLDER)), name)
    return [
        (step, review(settings, step.file.path, list_name, source=step.file, dates=dates).findings)
        for step in sequence.steps
    ]
