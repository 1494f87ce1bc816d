"""A send with a subject test: a Prepared send, the outbox and the editor's subjects in; the send's
phase as a Prepared send (its list and its messages' subject) and a line saying which, out.

    sample   `send --subjects A B --sample 20% --decide-after 4h`: the test is recorded and the
             rest of the send booked for the decision time (the worker starts it, as a send
             scheduled with --at); the sample (split.py) is planned and sent now, each reader
             their variant's subject. Re-running before the decision resumes the sample.
    decide   at the decision time (the worker's send, or the editor's): people's clicks per
             message of each variant (the scanner rules of clicks/rules.py) decide, once.
    rest     every reader of the list planned with the winner's subject: the sample's rows are
             in the log already, so each reader gets one message across both phases (the log's
             UNIQUE (issue, list, recipient) key).

People's clicks are told apart per message, so a test needs `[tracking] clicks = "per-reader"`:
with tracking off (or aggregate, whose clicks name no message) the test is refused.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

from newsletter.clicks.events import ClickEvent
from newsletter.clicks.rules import Windows, label
from newsletter.config.settings import Settings, TrackingMode, TrackingSettings
from newsletter.database import Database
from newsletter.database.subjecttests import SubjectTest
from newsletter.errors import DeliveryError
from newsletter.importers.subscribers import ListReport, fold_address
from newsletter.mail.message import MessageFactory
from newsletter.mail.tokens import signing_key
from newsletter.models import DeliveryStatus, OutgoingMessage, Subscriber
from newsletter.send.job import Listed, ListSource
from newsletter.send.preparation import Prepared
from newsletter.subjects.split import Split, Tally, decide


@dataclass(frozen=True)
class SubjectRequest:
    """What `send --subjects A B [--sample 20%] [--decide-after 4h]` asks for."""

    subjects: tuple[str, ...]
    sample: float  # a share of the list, 0 < sample <= 1
    decide_after: float  # seconds


class SampleSource:
    """The list, less the readers outside the sample (a ListSource)."""

    def __init__(self, inner: ListSource, split: Split) -> None:
        self.inner = inner
        self.split = split

    def read(self) -> tuple[Iterable[Listed], ListReport | None]:
        rows, report = self.inner.read()
        return (r for r in rows if self.split.in_sample(fold_address(r.envelope))), report


def begin(
    prepared: Prepared,
    database: Database,
    subjects: tuple[str, ...],
    sample: float,
    decide_after: float,
    now: float,
) -> None:
    """Record the test and book the rest of the send for the decision; refused (DeliveryError
    with the fix) on a staging list, without per-reader tracking, or once the send began."""
    settings, job = prepared.settings, prepared.job
    refuse_untracked(settings.tracking)
    if prepared.staging:
        raise DeliveryError(
            f"{job.list_name!r} is a staging list: a subject test goes to readers",
            hint="Send to a staging list without --subjects; test subjects on a real list.",
        )
    if len(set(subjects)) < len(subjects):
        raise DeliveryError("--subjects names the same subject twice", hint="Give two subjects.")
    found = database.subject_tests.get(job.issue, job.list_name)
    if found is not None:
        if found.subjects != subjects:
            raise DeliveryError(
                f"issue {job.issue} to {job.list_name!r} has a subject test already, of"
                f" {' and '.join(repr(s) for s in found.subjects)}",
                hint="Re-run `newsletter send` without --subjects to resume it.",
            )
        return
    if sum(database.deliveries.counts(job.issue, job.list_name).values()):
        raise DeliveryError(
            f"issue {job.issue} went to {job.list_name!r} already, with its own subject",
            hint="A subject test starts before a send's first message; re-run without --subjects.",
        )
    decide_at = now + decide_after
    database.subject_tests.begin(job.issue, job.list_name, subjects, sample, decide_at)
    zone = settings.newsletter.timezone or "UTC"
    database.schedules.book(job.issue, job.list_name, decide_at, zone, "subject test")


def refuse_untracked(tracking: TrackingSettings) -> None:
    mode = tracking.clicks
    if mode != TrackingMode.PER_READER:
        raise DeliveryError(
            f"a subject test is decided by people's clicks, and [tracking] clicks is '{mode}'",
            hint='Set [tracking] clicks = "per-reader" in newsletter.toml (each click must name'
            " its message to count for its subject), or send without --subjects.",
        )


def phase(
    prepared: Prepared, database: Database, test: SubjectTest, now: float
) -> tuple[Prepared, str]:
    """The send this run makes of a send with a subject test, and the line saying which."""
    settings, job = prepared.settings, prepared.job
    refuse_untracked(settings.tracking)
    secret = signing_key(settings, allow_ephemeral=False).secret
    split = Split(secret, job.issue, job.list_name, test.sample, len(test.subjects))
    factories = [_factory(prepared, subject, secret) for subject in test.subjects]
    if test.state == "sampling" and now < test.decide_at:

        def build(sub: Subscriber, message_id: str | None, row: int) -> OutgoingMessage:
            return factories[split.variant(fold_address(sub.envelope))].build(sub, message_id, row)

        sampled = replace(job, subscribers=SampleSource(job.subscribers, split), build=build)
        line = (
            f"subject test: {test.sample:.0%} of {job.list_name} now, each reader one of"
            f" {len(test.subjects)} subjects; the rest get the winner after the decision"
        )
        return replace(prepared, job=sampled), line
    if test.state == "sampling":
        decision = decide(
            test.subjects, tallies(database, settings.tracking, split, job.issue, job.list_name)
        )
        test = database.subject_tests.decide(
            job.issue, job.list_name, decision.winner, decision.detail
        )
    assert test.winner is not None
    winner = factories[test.winner]
    rest = replace(job, build=winner.build)
    return replace(prepared, job=rest), f"subject test decided: {test.detail}"


def tallies(
    database: Database, tracking: TrackingSettings, split: Split, issue: int, list_name: str
) -> list[Tally]:
    """Each variant's messages sent and, of them, the ones a person clicked (scanners' and
    prefetches' requests excluded by the rules of clicks/rules.py)."""
    variant_of: dict[int, int] = {}
    for row in database.deliveries.iter_rows(issue, list_name, [DeliveryStatus.SENT]):
        variant_of[row.id] = split.variant(row.recipient)
    events = (ClickEvent(*record) for record in database.clicks.events(issue, list_name))
    clicked = {
        labelled.event.row
        for labelled in label(events, Windows.from_settings(tracking))
        if labelled.human and labelled.event.row in variant_of
    }
    sent = Counter(variant_of.values())
    people = Counter(variant_of[row] for row in clicked if row is not None)
    return [Tally(sent[i], people[i]) for i in range(split.variants)]


def _factory(prepared: Prepared, subject: str, secret: bytes) -> MessageFactory:
    tracked = prepared.tracked
    assert tracked is not None  # [tracking] per-reader: prepare rendered the links as slots
    rendered = tracked.rendered.model_copy(update={"subject": subject})
    return MessageFactory(
        rendered, prepared.settings, prepared.job.list_name, secret=secret, links=tracked.links
    )


def subject_phase(
    prepared: Prepared, database: Database, request: SubjectRequest | None, now: float
) -> tuple[Prepared, str]:
    """`send`'s hook: the test begun when one is asked for; the phase of a send that has
    one; the send unchanged ('' for its line) otherwise. `database`: the command's."""
    if request is not None:
        begin(prepared, database, request.subjects, request.sample, request.decide_after, now)
    test = database.subject_tests.get(prepared.job.issue, prepared.job.list_name)
    if test is None:
        return prepared, ""
    return phase(prepared, database, test, now)


def report_lines(database: Database, settings: Settings, issue: int, list_name: str) -> list[str]:
    """What `report` says of the send's subject test: the decision and the figures behind it,
    or, while the sample's clicks are counted, each variant's so far. None: no test."""
    test = database.subject_tests.get(issue, list_name)
    if test is None:
        return []
    if test.state == "decided" and test.winner is not None:
        return [f"Subject test: {test.subjects[test.winner]!r} went to the rest. {test.detail}"]
    secret = signing_key(settings, allow_ephemeral=False).secret
    split = Split(secret, issue, list_name, test.sample, len(test.subjects))
    figures = "; ".join(
        f"{subject!r}: {t.messages} sent, {t.people} clicked by people"
        for subject, t in zip(
            test.subjects,
            tallies(database, settings.tracking, split, issue, list_name),
            strict=True,
        )
    )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(test.decide_at))
    return [f"Subject test ({test.sample:.0%} of the list), decided at {when}; so far {figures}."]
