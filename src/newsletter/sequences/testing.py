"""A step's test send: the settings, the command's database, a sequence, a step number and a
staging list in; a Prepared send of that step to the list's readers out, run by the send
coordinator as any send is.

The step is the one the worker sends (the same key in the delivery log, rendering and message
factory), its rows on the staging list started again for each test, so a test after an edit goes
out again. Only a staging list: real readers join a sequence by signing up, or by `newsletter
sequences enrol`, and the worker sends them each step once.
"""

from __future__ import annotations

from pathlib import Path

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.errors import ConfigError
from newsletter.issues.sequencefiles import FOLDER, load_sequence
from newsletter.mail.tokens import signing_key
from newsletter.send.job import Job
from newsletter.send.preparation import Prepared
from newsletter.send.recipients import Recipients
from newsletter.sequences.steps import step_mail


def prepare_step_test(
    settings: Settings, database: Database, name: str, number: int, list_name: str
) -> Prepared:
    """The step ready to send to the staging list (every fault raised before anything goes)."""
    if not settings.mailing_list(list_name).staging:
        raise ConfigError(
            f"list {list_name!r} is not a staging list: a step's test goes to a staging list",
            hint="Pass --list with a list that has staging = true in newsletter.toml; readers"
            " of a real list get the steps from the worker once they join.",
        )
    key = signing_key(settings, allow_ephemeral=False)
    step = load_sequence(settings.resolve(Path(FOLDER)), name).step(number)
    step_key = database.enrolments.step_key(name, number)
    database.deliveries.restart(step_key, list_name)  # a new test: every row due again
    mail = step_mail(settings, key, step, step_key, list_name)
    smtp = settings.smtp
    factory = mail.factory
    return Prepared(
        settings=settings,
        job=Job(
            step_key,
            list_name,
            Recipients(settings, list_name, key, database),
            factory.build,
            factory.message_id_of,
        ),
        sender=settings.newsletter.sender,
        server=f"{smtp.host}:{smtp.port} ({smtp.security})",
        key=key,
        tracked=mail.rendering,
        database=database,
    )
