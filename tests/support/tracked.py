"""A tracked send without SMTP, for the tests of the redirect and the report: the rows planned and
marked sent in the outbox, the send's links recorded as `send` records them, and each reader's
message built by the same factory; the links of a message read back as a mail client would."""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import EmailMessage
from html.parser import HTMLParser

from newsletter.config.settings import Settings
from newsletter.database import open_database
from newsletter.draft import review
from newsletter.issues import issue_path
from newsletter.models import DeliveryStatus, Subscriber
from newsletter.send.coordinator import record_tracked_links
from newsletter.send.preparation import prepare
from support.database import plan, record

CLICK = re.compile(r"/r/([A-Za-z0-9_-]+)$")


@dataclass(frozen=True)
class Sent:
    address: str
    row: int
    data: bytes

    def parts(self) -> tuple[str, str]:
        message = email.message_from_bytes(self.data, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        html, text = message.get_body(("html",)), message.get_body(("plain",))
        assert html is not None
        assert text is not None
        return str(html.get_content()), str(text.get_content())

    def html_links(self) -> list[str]:
        """Every href of the HTML part, in document order (the canary first)."""
        parser = _Hrefs()
        parser.feed(self.parts()[0])
        return parser.hrefs

    def tracked(self) -> list[str]:
        return [href for href in self.html_links() if CLICK.search(href)]


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href is not None:
            self.hrefs.append(href)


def tracked_send(
    settings: Settings, addresses: list[str], *, issue: int = 14, list_name: str = "main"
) -> list[Sent]:
    """Issue `issue` 'sent' to `addresses` on `list_name`: rows planned and marked sent, the
    links recorded; each reader's message as the engine would upload it."""
    draft = review(settings, issue_path(settings.issues_dir, issue), list_name)
    with open_database(settings.database_target) as database:
        prepared = prepare(settings, draft, list_name, database)
        record_tracked_links(prepared, database)
        plan(database, issue, list_name, addresses)
        rows = {row.recipient: row.id for row in database.deliveries.rows(issue, list_name)}
        sent = []
        for address in addresses:
            row = rows[address]
            message = prepared.job.build(Subscriber(envelope=address, name="Reader"), None, row)
            record(database, row, DeliveryStatus.SENT)
            sent.append(Sent(address, row, message.data))
    return sent
