"""A step's mail: the settings, a Step, its key in the delivery log and a list in; the step's
messages, sent by the send engine (its claims, lease, journal and `unknown`), out.

A step is sent as an issue is: rendered once (its links slotted when [tracking] clicks is on, and
recorded before the first message, so `serve` redirects every click token), a MessageFactory
building each reader's message, smtp.Pool carrying them and engine.Engine recording each
outcome once. The issue number the message and its click tokens carry is the step's key, so a
step's Message-IDs and clicks are its own, never an issue's. Rendered again when the step's
file changes: readers who have not had the step get it as it is now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.importers.subscribers import ListReport
from newsletter.issues.sequencefiles import Step
from newsletter.mail.message import MessageFactory
from newsletter.mail.tokens import SigningKey
from newsletter.mail.tracking import SendRendering, render_for_sending
from newsletter.rendering.render import dated
from newsletter.send.engine import Engine
from newsletter.send.job import Delivered, Job, Listed, Options
from newsletter.send.lease import Lease, worker_id
from newsletter.send.preparation import smtp_pool


@dataclass(frozen=True)
class StepMail:
    step: Step
    key: int
    list_name: str
    rendering: SendRendering
    factory: MessageFactory
    fingerprint: tuple[float, int]  # the step file's mtime and size when rendered


class _Planned:
    """The ListSource of a step's Job: its rows are planned by the sequence duty, never read
    from a list, so there is nothing to read."""

    def read(self) -> tuple[Iterable[Listed], ListReport | None]:
        return (), None


def fingerprint(step: Step) -> tuple[float, int]:
    stat = step.file.path.stat()
    return stat.st_mtime, stat.st_size


def step_mail(
    settings: Settings, key: SigningKey, step: Step, step_key: int, list_name: str
) -> StepMail:
    """The step rendered for the list, numbered by its key, dated today."""
    issue = dated(step.issue.model_copy(update={"number": step_key}), settings.newsletter.today())
    rendering = render_for_sending(issue, settings, list_name)
    factory = MessageFactory(
        rendering.rendered, settings, list_name, secret=key.secret, links=rendering.links
    )
    return StepMail(step, step_key, list_name, rendering, factory, fingerprint(step))


class StepMails:
    """Each (step, list)'s StepMail, rendered once until its file changes."""

    def __init__(self, settings: Settings, key: SigningKey) -> None:
        self.settings = settings
        self.key = key
        self._made: dict[tuple[int, str], StepMail] = {}

    def get(self, step: Step, step_key: int, list_name: str) -> StepMail:
        made = self._made.get((step_key, list_name))
        if made is None or made.step != step or made.fingerprint != fingerprint(step):
            made = step_mail(self.settings, self.key, step, step_key, list_name)
            self._made[(step_key, list_name)] = made
        return made


def record_links(mail: StepMail, database: Database, settings: Settings) -> None:
    """The links the step's messages carry, by place, before the first goes out (nothing when
    [tracking] clicks is off)."""
    if mail.rendering.links:
        database.sent_links.record(
            mail.key, mail.list_name, settings.tracking.clicks, mail.rendering.links
        )


async def deliver(mail: StepMail, database: Database, settings: Settings) -> Delivered:
    """The step's free rows on the list sent by the engine under a lease of its own (a run's
    worker id is unique for ever: the log's workers table keeps each)."""
    options = Options.merged(settings, concurrency=settings.worker.concurrency)
    job = Job(mail.key, mail.list_name, _Planned(), mail.factory.build, mail.factory.message_id_of)
    record_links(mail, database, settings)
    database.enrolments.retry(mail.key, mail.list_name)
    pool = smtp_pool(settings, options.concurrency)
    with Lease(database, worker_id(), mail.key, mail.list_name, options.lease) as lease:
        return await Engine(job, pool, database, options, lease=lease).run()
