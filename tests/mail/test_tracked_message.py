"""Messages with tracked links, parsed back as a mail client would: every link of the issue in
both parts points at BASE/r/TOKEN, and each token names the place whose link it stood for;
the reader's own links never change; aggregate messages fill nothing per reader for the links,
per-reader ones fill the row's tokens; the clip is kept with the links at their real length."""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path

import dkim
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from newsletter.config.settings import DkimSettings, Settings
from newsletter.issues import load_issue_file
from newsletter.mail.clicktokens import ClickTarget, verify_click
from newsletter.mail.message import MessageFactory, sample_message
from newsletter.mail.tracking import render_for_sending
from newsletter.models import Issue, Subscriber
from newsletter.rendering.clip import CUT_AT, kept_part, wire_size
from newsletter.rendering.places import CANARY, issue_links, text_links
from newsletter.rendering.render import render_issue
from support.dkimkeys import dkim_value, pem
from support.project import copy_project
from support.weeklies import ENGLISH, add_weekly, weekly_settings

SECRET = b"test-secret-0123456789abcdef"
CLICK = re.compile(r"https://news\.example\.org/(?:x+/)?r/([A-Za-z0-9_-]+)")


def tracked(settings: Settings, mode: str) -> Settings:
    return settings.model_copy(
        update={"tracking": settings.tracking.model_copy(update={"clicks": mode})}
    )


def reader(n: int = 1) -> Subscriber:
    return Subscriber(envelope=f"reader{n}@example.com", name=f"Reader {n}")


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href is not None:
            self.hrefs.append(href)


def parts(data: bytes) -> tuple[str, str]:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    html, text = message.get_body(("html",)), message.get_body(("plain",))
    assert html is not None
    assert text is not None
    return str(html.get_content()), str(text.get_content())


def hrefs(html: str) -> list[str]:
    parser = _Hrefs()
    parser.feed(html)
    return parser.hrefs


def targets(part: str) -> list[ClickTarget]:
    return [verify_click(SECRET, token) for token in CLICK.findall(part)]


def factory(settings: Settings, issue: Issue, mode: str) -> tuple[MessageFactory, list[str]]:
    """The factory, and the untracked email's hrefs (what the links must lead to)."""
    chosen = tracked(settings, mode)
    sending = render_for_sending(issue, chosen, "main")
    made = MessageFactory(sending.rendered, chosen, "main", secret=SECRET, links=sending.links)
    plain = MessageFactory(render_issue(issue, settings), settings, "main", secret=SECRET)
    return made, hrefs(parts(plain.build(reader()).data)[0])


@pytest.mark.parametrize("mode", ["aggregate", "per-reader"])
def test_every_link_leads_where_the_issue_links_it(
    settings: Settings, issue: Issue, mode: str
) -> None:
    made, original = factory(settings, issue, mode)
    html, text = parts(made.build(reader(), row_id=77).data)
    by_place = {link.place: link.url for link in issue_links(issue)}
    found = hrefs(html)
    canary = verify_click(SECRET, CLICK.fullmatch(found[0]).group(1))  # type: ignore[union-attr]
    assert canary.place == CANARY
    # The rest, in order, are the email's links: each one's token names the place whose URL
    # the untracked email has there; the reader's own are the same as without tracking.
    assert len(found) - 1 == len(original)
    for href, was in zip(found[1:], original, strict=True):
        click = CLICK.fullmatch(href)
        if click is None:
            assert href == was
            assert "/r/" not in href
            continue
        target = verify_click(SECRET, click.group(1))
        assert by_place[target.place] == was
        assert target.issue == 14
        if mode == "per-reader":
            assert (target.row, target.list_name) == (77, None)
        else:
            assert (target.row, target.list_name) == (None, "main")
            assert target.names(was)
    assert any("/unsubscribe/" in h for h in found)
    # The text part: each token names the place of the line it stands on.
    expected = [link.place for link in text_links(issue) if link.url.startswith("http")]
    assert [t.place for t in targets(text)] == expected
    assert "/unsubscribe/" in text
    assert "/issues/14" in text


def test_aggregate_messages_fill_nothing_per_reader_for_their_links(
    settings: Settings, issue: Issue
) -> None:
    made, _ = factory(settings, issue, "aggregate")
    off, _ = factory(settings, issue, "off")
    # The values filled per message are the reader's own (name, unsubscribe, web version):
    # as many as without tracking.
    assert made._html[1] == off._html[1]
    assert made._text[1] == off._text[1]
    first, second = (parts(made.build(reader(n), row_id=n).data) for n in (1, 2))
    assert CLICK.findall(first[0]) == CLICK.findall(second[0])
    assert CLICK.findall(first[1]) == CLICK.findall(second[1])


def test_per_reader_messages_carry_their_rows_tokens(settings: Settings, issue: Issue) -> None:
    made, _ = factory(settings, issue, "per-reader")
    for row in (1, 2, 300_000):
        html, text = parts(made.build(reader(row), row_id=row).data)
        assert {t.row for t in targets(html) + targets(text)} == {row}
        assert all(len(token) == 24 for token in CLICK.findall(html))


def test_the_sample_message_names_no_reader(settings: Settings, issue: Issue) -> None:
    for mode in ("aggregate", "per-reader"):
        chosen = tracked(settings, mode).model_copy(update={"secret": SecretStr(SECRET.decode())})
        sending = render_for_sending(issue, chosen, "main")
        sample, _ = sample_message(sending.rendered, chosen, "main", sending.links)
        html, text = parts(sample.data)
        assert {t.row for t in targets(html) + targets(text)} == {0}


def test_tracking_off_sends_the_links_as_they_are(settings: Settings, issue: Issue) -> None:
    sending = render_for_sending(issue, settings, "main")
    assert sending.links == ()
    assert sending.rendered == render_issue(issue, settings)


def test_a_signed_per_reader_message_verifies(
    settings: Settings, project: Path, issue: Issue
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (project / "dkim.pem").write_bytes(pem(key))
    config = DkimSettings(
        domain="news.example.org", selector="nl2026", private_key=Path("dkim.pem")
    )
    chosen = tracked(settings, "per-reader").model_copy(update={"dkim": config})
    sending = render_for_sending(issue, chosen, "main")
    made = MessageFactory(sending.rendered, chosen, "main", secret=SECRET, links=sending.links)
    record = dkim_value(key).encode()

    def lookup(name: bytes, timeout: int = 5) -> bytes:
        return record

    for row in (5, 6):
        data = made.build(reader(row), row_id=row).data
        assert targets(parts(data)[0])
        assert dkim.verify(data, dnsfunc=lookup)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["aggregate", "per-reader"])
def test_the_links_at_their_length_still_fit_the_clip(tmp_path: Path, mode: str) -> None:
    project = copy_project(tmp_path / "project")
    issue = load_issue_file(add_weekly(project, ENGLISH))
    # 200-odd links, each made longer by a base_url with a long path: the tracked email would
    # be past the clip where the untracked one is not.
    settings = tracked(weekly_settings(project, ENGLISH), mode)
    base = "https://news.example.org/" + "x" * 200
    newsletter = settings.newsletter.model_copy(update={"base_url": base})
    settings = settings.model_copy(update={"newsletter": newsletter})
    untracked = render_issue(issue, settings)
    assert untracked.online_from is None
    sending = render_for_sending(issue, settings, "main")
    made = MessageFactory(sending.rendered, settings, "main", secret=SECRET, links=sending.links)
    html, text = parts(made.build(reader(), row_id=123_456).data)
    assert sending.rendered.cut is not None
    assert wire_size(html) <= CUT_AT
    # The HTML part's tracked links are the places of what it kept, all of them; the pieces
    # cut from it keep their tracked links in the text part.
    kept = {link.place for link in issue_links(kept_part(issue, sending.rendered.cut))}
    every = {link.place for link in issue_links(issue)}
    assert {t.place for t in targets(html)} - {CANARY} == kept
    assert {t.place for t in targets(text)} - {CANARY} == every
    assert len(every - kept) > 10
