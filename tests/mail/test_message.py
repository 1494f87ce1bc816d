"""Messages parsed back with the standard library, as mail clients would: structure, decoded
parts, headers, line lengths, encodings, and header injection attempts."""

from __future__ import annotations

import datetime as dt
import email
import email.header
import email.policy
import email.utils
import hashlib
import random
import re
from email.message import EmailMessage, Message
from pathlib import Path

import pytest

from newsletter.bounces.verp import make_tag, read_tag
from newsletter.config.settings import Settings
from newsletter.errors import ConfigError, TemplateError, UnsafeHeaderError
from newsletter.importers.subscribers import ListReport, read_subscribers
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory, write_eml_files
from newsletter.mail.mime import encode_words
from newsletter.mail.tokens import verify
from newsletter.models import Placeholder, RenderedEmail, Subscriber
from newsletter.rendering.render import render_issue

SECRET = b"test-secret-0123456789abcdef"
NAME, UNSUB, WEB = Placeholder.NAME.value, Placeholder.UNSUBSCRIBE_URL.value, Placeholder.WEB_URL
CJK = "分布式深度学习框架的论文正式公开，基于抽象和模型，研发出拥有各种并行范式的框架。"

CJK_HTML = (
    "<!doctype html><html><body>"
    f'<p><a href="{WEB}">在浏览器中查看</a></p><p>{NAME}，你好！</p>'
    + "".join(f"<p>{CJK}{i}</p>" for i in range(300))  # one very long line
    + f'\n<p><a href="{UNSUB}">退订</a> · <a href="{WEB}">{WEB}</a></p>\n</body></html>\n'
)
CJK_TEXT = f"{NAME}，你好！\n\n" + "\n".join(CJK * 3 for _ in range(40)) + f"\n\n退订: {UNSUB}\n"
EN_HTML = (
    f'<html><body><p>Hi {NAME},</p><p>Read <a href="{WEB}">online</a>.</p>\n'
    + "<p>"
    + "word " * 400  # a 2000-character line
    + "</p>\n<p>a=b & c, trailing space \n"
    + f'<a href="{UNSUB}">Unsubscribe</a></p></body></html>'
)
EN_TEXT = f"Hi {NAME},\n\nplain text =3D not encoded.   \n{'x' * 1200}\n\nUnsubscribe: {UNSUB}\n"


def rendered(
    html: str = CJK_HTML, text: str = CJK_TEXT, subject: str = "AI系统内容推荐第14期"
) -> RenderedEmail:
    return RenderedEmail(issue_number=14, subject=subject, html=html, text=text)


def reader(name: str = "李雷", address: str = "li.lei@example.com", line: int = 2) -> Subscriber:
    return Subscriber(envelope=address, name=name, line=line)


def parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def filled(template: str, factory: MessageFactory, subscriber: Subscriber, *, html: bool) -> str:
    name = subscriber.name or "朋友"
    if html:
        name = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        name = name.replace('"', "&quot;").replace("'", "&#x27;")
    return (
        template.replace(NAME, name)
        .replace(UNSUB, factory.unsubscribe_url(subscriber))
        .replace(WEB, factory.web_url)
    )


def parts(message: EmailMessage) -> tuple[str, str]:
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None
    assert html is not None
    return (
        str(text.get_content()).replace("\r\n", "\n"),
        str(html.get_content()).replace("\r\n", "\n"),
    )


def assert_wire_format(data: bytes, *, folded: bool = True) -> None:
    assert b"\n" not in data.replace(b"\r\n", b""), "bare LF"
    assert b"\r" not in data.replace(b"\r\n", b""), "bare CR"
    assert max(len(line) for line in data.split(b"\r\n")) <= 998
    assert data.isascii(), "8-bit data without 8BITMIME"
    head = data.split(b"\r\n\r\n", 1)[0]
    # Only the unsubscribe URLs cannot be folded (a line over 78 is allowed, over 998 is not).
    foldable = [line for line in head.split(b"\r\n") if b"unsubscribe" not in line]
    assert not folded or max(len(line) for line in foldable) <= 78


def header_lines(data: bytes, field: bytes) -> list[bytes]:
    """The raw lines of one header field: its first line and the folded ones after it."""
    match = re.search(rb"^" + field + rb":.*?\r\n(?=[^ \t])", data, re.M | re.S)
    assert match is not None
    return match.group().split(b"\r\n")[:-1]


@pytest.fixture
def factory(settings: Settings) -> MessageFactory:
    return MessageFactory(rendered(), settings, "main", secret=SECRET)


def test_structure_and_decoded_parts(factory: MessageFactory) -> None:
    subscriber = reader()
    data = factory.build(subscriber).data
    assert_wire_format(data)
    message = parse(data)
    assert message.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in message.iter_parts()] == ["text/plain", "text/html"]
    assert all(p.get_content_charset() == "utf-8" for p in message.iter_parts())
    text, html = parts(message)
    assert text == filled(CJK_TEXT, factory, subscriber, html=False)
    assert html == filled(CJK_HTML, factory, subscriber, html=True)
    assert message.defects == []
    assert all(p.defects == [] for p in message.iter_parts())


def test_cjk_parts_are_base64_and_english_parts_quoted_printable(settings: Settings) -> None:
    cjk = MessageFactory(rendered(), settings, "main", secret=SECRET)
    en = MessageFactory(rendered(EN_HTML, EN_TEXT, "Issue 14"), settings, "main", secret=SECRET)
    assert (cjk.text_encoder.name, cjk.html_encoder.name) == ("base64", "base64")
    assert (en.text_encoder.name, en.html_encoder.name) == ("quoted-printable", "quoted-printable")
    # Base64 lines can never start with "."; quoted-printable ones can, so the transport checks.
    assert cjk.build(reader()).smtp_ready
    assert not en.build(reader()).smtp_ready
    for subscriber in (reader(), reader("Zoë Ünal", "z@example.com"), reader("", "b@example.com")):
        data = en.build(subscriber).data
        assert_wire_format(data)
        text, html = parts(parse(data))
        assert text == filled(EN_TEXT, en, subscriber, html=False)
        assert html == filled(EN_HTML, en, subscriber, html=True)
    raw = en.build(reader()).data
    assert b"Content-Transfer-Encoding: quoted-printable" in raw
    assert b"trailing space=20\r\n" in raw  # trailing whitespace survives transport


@pytest.mark.slow
def test_many_value_lengths_decode_exactly(settings: Settings) -> None:
    """Every offset of the cached base64 and quoted-printable lines, checked by decoding."""
    rng = random.Random(4)
    alphabet = "abcXYZ 李雷韩梅é&<>\"'"
    cjk = MessageFactory(rendered(), settings, "main", secret=SECRET)
    en = MessageFactory(rendered(EN_HTML, EN_TEXT, "Issue 14"), settings, "main", secret=SECRET)
    for length in range(0, 130):
        name = "".join(rng.choice(alphabet) for _ in range(length)).strip()
        subscriber = reader(name, f"user{length}@example.com")
        for factory, (text_t, html_t) in ((cjk, (CJK_TEXT, CJK_HTML)), (en, (EN_TEXT, EN_HTML))):
            message = factory.build(subscriber)
            data = message.data
            assert_wire_format(data)
            if message.smtp_ready:  # the transport sends it after DATA without dot-stuffing
                assert not data.startswith(b".")
                assert b"\r\n." not in data
            text, html = parts(parse(data))
            assert text == filled(text_t, factory, subscriber, html=False)
            assert html == filled(html_t, factory, subscriber, html=True)


def test_values_are_html_escaped_in_html_only(factory: MessageFactory) -> None:
    subscriber = reader("<b>\"Bob\" & 'Al'</b>", "bob@example.com")
    text, html = parts(parse(factory.build(subscriber).data))
    assert "<b>\"Bob\" & 'Al'</b>，你好" in text
    assert "&lt;b&gt;&quot;Bob&quot; &amp; &#x27;Al&#x27;&lt;/b&gt;，你好" in html
    assert "<b>" not in html


def test_headers(settings: Settings) -> None:
    when = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)
    factory = MessageFactory(rendered(), settings, "main", secret=SECRET, date=when)
    subscriber = reader("王小明", "carol@xn--fsqu00a.xn--55qx5d")
    outgoing = factory.build(subscriber)
    message = parse(outgoing.data)
    assert message["From"] == "AI系统内容推荐 <digest@news.example.org>"
    assert message["To"] == "王小明 <carol@xn--fsqu00a.xn--55qx5d>"
    assert message["Subject"] == "AI系统内容推荐第14期"
    assert email.utils.parsedate_to_datetime(message["Date"]) == when
    assert message["MIME-Version"] == "1.0"
    assert message["Message-ID"] == outgoing.message_id
    assert re.fullmatch(r"<[0-9a-f]{32}@news\.example\.org>", outgoing.message_id)
    assert message["List-Id"] == "AI系统内容推荐 <ai-systems.news.example.org>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert message["Content-Language"] == "zh-CN"
    assert "Reply-To" not in message
    assert "X-Newsletter-Test" not in message
    https, mailto = re.findall(r"<([^>]+)>", message["List-Unsubscribe"])
    assert https == factory.unsubscribe_url(subscriber)
    assert https.startswith("https://news.example.org/unsubscribe/")
    assert verify(SECRET, https.rsplit("/", 1)[1]) == ("main", "carol@xn--fsqu00a.xn--55qx5d")
    assert mailto.startswith("mailto:digest@news.example.org?subject=unsubscribe%20")
    assert (outgoing.sender, outgoing.recipient) == (
        "digest@news.example.org",
        "carol@xn--fsqu00a.xn--55qx5d",
    )
    # The same URL is the visible link in both parts.
    text, html = parts(message)
    assert https in text
    assert f'href="{https}"' in html
    assert 'href="https://news.example.org/issues/14"' in html


def test_header_names_are_exactly_the_expected_set(factory: MessageFactory) -> None:
    message = parse(factory.build(reader()).data)
    assert list(message.keys()) == [
        "From",
        "To",
        "Subject",
        "Date",
        "Message-ID",
        "List-Id",
        "List-Unsubscribe",
        "List-Unsubscribe-Post",
        "Feedback-ID",
        "MIME-Version",
        "Content-Language",
        "Content-Type",
    ]
    assert message["Feedback-ID"] == "14:main:newsletter:news.example.org"


def test_message_id_is_stable_and_unique(settings: Settings) -> None:
    a = MessageFactory(rendered(), settings, "main", secret=SECRET)
    b = MessageFactory(rendered(), settings, "main", secret=b"another-secret-xxxxxxxx")
    staging = MessageFactory(rendered(), settings, "staging", secret=SECRET)
    other_issue = MessageFactory(
        RenderedEmail(issue_number=15, subject="x", html=CJK_HTML, text=CJK_TEXT),
        settings,
        "main",
        secret=SECRET,
    )
    one, two = reader(), reader("X", "x@example.com")
    assert (
        a.build(one).message_id == a.build(one).message_id == a.message_id_of("li.lei@example.com")
    )
    assert a.message_id(one) == a.message_id(reader("other name", "LI.LEI@example.com"))
    ids = {a.message_id(one), a.message_id(two), staging.message_id(one)}
    ids.add(other_issue.message_id(one))
    ids.add(b.message_id(one))  # keyed: another secret, another Message-ID
    assert len(ids) == 5


def test_nobody_can_compute_a_message_id_without_the_secret(settings: Settings) -> None:
    """Issue 18: the Message-ID was sha256(issue, list, address), all of it public or guessable,
    so a stranger could quote every reader's Message-ID in a forged complaint."""
    factory = MessageFactory(rendered(), settings, "main", secret=SECRET)
    address = "li.lei@example.com"
    unkeyed = hashlib.sha256(f"14\nmain\n{address}".encode()).hexdigest()[:32]
    keyed = factory.message_id_of(address)
    assert keyed != f"<{unkeyed}@news.example.org>"
    assert re.fullmatch(r"<[0-9a-f]{32}@news\.example\.org>", keyed)
    assert unkeyed not in keyed


def test_a_stored_message_id_is_used_as_it_is(factory: MessageFactory) -> None:
    # A retry or a resend goes out under the Message-ID its outbox row holds.
    fresh = factory.build(reader())
    again = factory.build(reader(), "<kept@x>")
    assert again.message_id == "<kept@x>"
    assert b"Message-ID: <kept@x>\r\n" in again.data
    assert again.data.count(b"Message-ID") == 1
    assert again.data.replace(b"<kept@x>", fresh.message_id.encode()) == fresh.data


@pytest.mark.parametrize("stored", ["<a b@x>", "<x>\r\nBcc: y@z", "no-brackets"])
def test_a_stored_message_id_that_could_inject_is_refused(
    factory: MessageFactory, stored: str
) -> None:
    with pytest.raises(UnsafeHeaderError):
        factory.build(reader(), stored)


def test_reply_to_when_configured(settings: Settings) -> None:
    newsletter = settings.newsletter.model_copy(
        update={"reply_to": "编辑部 <editor@news.example.org>"}
    )
    configured = settings.model_copy(update={"newsletter": newsletter})
    factory = MessageFactory(rendered(), configured, "main", secret=SECRET)
    message = parse(factory.build(reader()).data)
    assert message["Reply-To"] == "编辑部 <editor@news.example.org>"


def test_staging_list_is_marked_as_a_test(settings: Settings) -> None:
    factory = MessageFactory(rendered(), settings, "staging", secret=SECRET)
    message = parse(factory.build(reader("编辑", "editor@news.example.org")).data)
    assert message["Subject"] == "【测试】AI系统内容推荐第14期"  # in the newsletter's language
    assert message["X-Newsletter-Test"] == "yes"
    assert message["List-Id"] == "AI系统内容推荐 (staging) <staging.ai-systems.news.example.org>"
    forced = MessageFactory(rendered(), settings, "main", secret=SECRET, test=True)
    assert parse(forced.build(reader()).data)["Subject"].startswith("【测试】")
    english = settings.model_copy(
        update={"newsletter": settings.newsletter.model_copy(update={"language": "en"})}
    )
    in_english = MessageFactory(rendered(), english, "staging", secret=SECRET)
    assert parse(in_english.build(reader()).data)["Subject"].startswith("[Test] AI")


def test_long_cjk_subject_folds_without_adjacent_encoded_words(settings: Settings) -> None:
    subject = "AI系统内容推荐第14期：" + CJK * 3 + " — OneFlow, Colossal-AI, 派大星 & Pathways"
    factory = MessageFactory(rendered(subject=subject), settings, "main", secret=SECRET)
    data = factory.build(reader()).data
    head = data.split(b"\r\n\r\n", 1)[0]
    assert b"?==?" not in head
    lines = header_lines(data, b"Subject")
    assert len(lines) > 3
    assert all(len(line) <= 78 for line in lines)
    assert all(len(w) <= 75 for w in re.findall(rb"=\?[^?]+\?[bq]\?[^?]*\?=", head, re.I))
    assert parse(data)["Subject"] == subject
    # The legacy parser that older clients resemble gets the same words back.
    legacy = email.message_from_bytes(data)
    decoded = email.header.make_header(email.header.decode_header(legacy["Subject"]))
    assert str(decoded) == subject


def test_long_ascii_subject_folds_at_spaces(settings: Settings) -> None:
    subject = "Weekly digest: " + " ".join(f"topic{i}" for i in range(40))
    factory = MessageFactory(rendered(subject=subject), settings, "main", secret=SECRET)
    data = factory.build(reader()).data
    assert_wire_format(data)
    lines = header_lines(data, b"Subject")
    assert len(lines) > 1
    assert b"=?" not in b"".join(lines)
    assert parse(data)["Subject"] == subject


def test_encoded_words_never_split_a_character() -> None:
    for text in ("é" * 80, "😀" * 40, "李" * 100, "a" * 200):
        words = encode_words(text, 60)
        assert all(len(w) <= 75 for w in words)
        decoded = [email.header.decode_header(w)[0] for w in words]
        assert b"".join(bytes(data) for data, _ in decoded).decode("utf-8") == text
        # Each word alone is whole characters: no word ends inside a UTF-8 sequence.
        assert all(bytes(data).decode("utf-8") for data, _ in decoded)


@pytest.mark.parametrize(
    "name",
    [
        "Bob\n",
        "Bob\r\nBcc: victim@example.com",
        "=?UTF-8?Q?=0A?=Bcc: victim@example.com",
        "=?utf-8?q?=0D=0ABcc:_x@example.com?=",
        "Nul\x00",
        "Sep\u2028Bcc: x@example.com",
    ],
)
def test_injection_through_the_name_is_refused(factory: MessageFactory, name: str) -> None:
    # The loader already rejects these rows; the builder refuses them too, for any other caller.
    subscriber = Subscriber.model_construct(envelope="bob@example.com", name=name, line=7)
    with pytest.raises(UnsafeHeaderError, match="line 7"):
        factory.build(subscriber)


@pytest.mark.parametrize(
    "subject", ["Issue 14\n", "Issue\r\nBcc: x@example.com", "=?UTF-8?Q?=0A?="]
)
def test_injection_through_the_subject_is_refused(settings: Settings, subject: str) -> None:
    bad = RenderedEmail.model_construct(issue_number=14, subject=subject, html="x", text="x")
    with pytest.raises(UnsafeHeaderError, match="subject"):
        MessageFactory(bad, settings, "main", secret=SECRET)


def test_this_python_would_inject_where_we_do_not(settings: Settings) -> None:
    """Why the checks exist: on affected Pythons (3.11.7 here), EmailMessage puts these on the
    wire as a real extra header (CVE-2024-6923, CVE-2026-1299); the factory refuses them."""
    injected = 0
    for subject in ("Issue 14\n", "=?UTF-8?Q?=0A?=Bcc: victim@example.com"):
        naive = EmailMessage()
        naive["Subject"] = subject
        naive["To"] = "a@example.com"
        wire = naive.as_bytes(policy=email.policy.SMTP)
        injected += b"\n" in wire.replace(b"\r\n", b"")
        with pytest.raises(UnsafeHeaderError):
            MessageFactory(rendered(subject=subject), settings, "main", secret=SECRET)
    if not injected:
        pytest.skip("this Python's email package is not affected (the refusals were checked)")


def test_tampered_header_block_is_caught_before_it_leaves(factory: MessageFactory) -> None:
    factory._middle = [*factory._middle, b"Bcc: victim@example.com\r\n"]
    with pytest.raises(UnsafeHeaderError, match="nothing was sent"):
        factory.build(reader())


def test_non_ascii_envelope_is_refused(factory: MessageFactory) -> None:
    subscriber = Subscriber(envelope="carol@例子.公司")
    with pytest.raises(UnsafeHeaderError, match="not ASCII"):
        factory.build(subscriber)


def test_unknown_placeholder_is_a_template_error(settings: Settings) -> None:
    with pytest.raises(TemplateError, match="__NL_EMAIL__"):
        MessageFactory(rendered(html="<p>__NL_EMAIL__</p>"), settings, "main", secret=SECRET)


@pytest.mark.parametrize(
    ("section", "update", "message"),
    [
        ("newsletter", {"sender": "Not an address"}, "newsletter.sender"),
        ("newsletter", {"sender": "Evil\r\n <a@example.com>"}, "newsletter.sender"),
        ("newsletter", {"reply_to": "x@@example.com"}, "newsletter.reply_to"),
        ("newsletter", {"base_url": "https://news.example.org/a b"}, "base_url"),
    ],
)
def test_bad_settings_are_config_errors(
    settings: Settings, section: str, update: dict[str, str], message: str
) -> None:
    changed = settings.model_copy(
        update={section: getattr(settings, section).model_copy(update=update)}
    )
    with pytest.raises(ConfigError, match=message):
        MessageFactory(rendered(), changed, "main", secret=SECRET)


def test_non_ascii_list_name_gets_a_config_error_not_a_traceback(settings: Settings) -> None:
    lists = dict(settings.lists)
    lists["测试"] = lists["staging"].model_copy(update={"id": ""})
    changed = settings.model_copy(update={"lists": lists})
    with pytest.raises(ConfigError, match="is not a valid List-Id"):
        MessageFactory(rendered(), changed, "测试", secret=SECRET)
    lists["测试"] = lists["staging"]
    factory = MessageFactory(rendered(), changed, "测试", secret=SECRET)
    message = parse(factory.build(reader()).data)
    assert message["X-Newsletter-Test"] == "yes"
    token = factory.token(reader())
    assert verify(SECRET, token) == ("测试", "li.lei@example.com")


def test_bad_list_id_is_a_config_error(settings: Settings) -> None:
    lists = dict(settings.lists)
    lists["main"] = lists["main"].model_copy(update={"id": "has spaces <x>"})
    with pytest.raises(ConfigError, match=r"lists\.main\.id"):
        MessageFactory(
            rendered(), settings.model_copy(update={"lists": lists}), "main", secret=SECRET
        )


def test_issue_14_end_to_end(settings: Settings, project: Path) -> None:
    issue = render_issue(load_issue(settings.issues_dir, 14), settings)
    factory = MessageFactory(issue, settings, "main", secret=SECRET)
    report = ListReport(project / "subscribers.example.csv")
    subscribers = list(read_subscribers(project / "subscribers.example.csv", report))
    assert len(subscribers) == 5
    for subscriber in subscribers:
        data = factory.build(subscriber).data
        assert_wire_format(data)
        message = parse(data)
        text, html = parts(message)
        assert text == filled(issue.text, factory, subscriber, html=False).replace("\r\n", "\n")
        assert html == filled(issue.html, factory, subscriber, html=True).replace("\r\n", "\n")
        assert "__NL_" not in text + html
        assert (subscriber.name or "朋友") in text
        assert factory.unsubscribe_url(subscriber) in html
        assert message["Subject"] == issue.subject
        assert len(data) < 102_000  # Gmail clips larger messages, footer and unsubscribe link too


def test_write_eml_files_replaces_the_previous_run(factory: MessageFactory, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "000009-old@example.com.eml").write_text("from an earlier dry run")
    (out / "saved.eml").write_text("kept")
    (out / "notes.txt").write_text("kept")
    subscribers = [reader(), reader("", "x/../y@example.com"), reader("C", "c@example.com")]
    written, removed = write_eml_files(factory, subscribers, out)
    assert (written, removed) == (3, 1)
    names = sorted(p.name for p in out.glob("0*.eml"))
    assert names == [
        "000001-li.lei@example.com.eml",
        "000002-x_.._y@example.com.eml",
        "000003-c@example.com.eml",
    ]
    assert (out / "notes.txt").exists()
    assert (out / "saved.eml").exists()
    message: Message = email.message_from_bytes((out / names[0]).read_bytes())
    assert message["To"].endswith("<li.lei@example.com>")


@pytest.mark.parametrize(
    "name",
    [
        "Chen, Alice",
        "Dave O'Neil",
        'The "Boss" \\ Admin',
        "alice@example.com",
        "Zoë Ünal",
        "李" * 60,
        "Mixed 中文 and English (with parens)",
        "a" * 150,
    ],
)
def test_display_names_round_trip_through_the_to_header(factory: MessageFactory, name: str) -> None:
    data = factory.build(reader(name, "x@example.com")).data
    assert_wire_format(data, folded=" " in name or not name.isascii())
    to = parse(data)["To"]
    assert len(to.addresses) == 1
    assert to.addresses[0].addr_spec == "x@example.com"
    if len(name.encode()) <= 45:  # one encoded word
        assert to.addresses[0].display_name == name
    else:
        # RFC 2047 caps a word at 75 characters, so long names take several, and the space
        # between them is to be ignored. Mail clients do; Python's newer parser keeps it.
        assert to.addresses[0].display_name.replace(" ", "") == name.replace(" ", "")
    legacy = email.message_from_bytes(data)
    decoded = str(email.header.make_header(email.header.decode_header(legacy["To"])))
    assert email.utils.parseaddr(decoded) == (name, "x@example.com")


def test_no_name_can_add_a_header(factory: MessageFactory) -> None:
    """Seeded fuzzing: any name either is refused or comes back as exactly that name."""
    rng = random.Random(2024)
    pieces = [
        "a", "Z", " ", "  ", ",", ";", ":", '"', "\\", "<", ">", "@", "(", ")", ".", "=?",
        "?=", "=?utf-8?q?", "=0A", "=0D", "Bcc:", "\r", "\n", "\r\n", "\t", "\x00", "\x0b",
        "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\x7f", "李", "é", "😀", "\ufeff", "\u202e",
    ]  # fmt: skip
    expected = list(parse(factory.build(reader()).data).keys())
    refused = 0
    for i in range(600):
        name = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))).strip(" ")
        subscriber = Subscriber.model_construct(envelope="x@example.com", name=name, line=i)
        try:
            data = factory.build(subscriber).data
        except UnsafeHeaderError:
            refused += 1
            continue
        assert_wire_format(data, folded=False)
        message = parse(data)
        assert list(message.keys()) == expected, name
        shown = message["To"].addresses[0].display_name if name else ""
        assert shown.replace(" ", "") == name.replace(" ", ""), name
    assert 0 < refused < 600


def test_verp_return_path_and_tag_header(settings: Settings) -> None:
    verp = settings.model_copy(
        update={
            "bounces": settings.bounces.model_copy(update={"return_path": "b@news.example.org"})
        }
    )
    factory = MessageFactory(rendered(), verp, "main", secret=SECRET)
    outgoing = factory.build(reader(), None, 4242)
    tag = make_tag(SECRET, 4242)
    assert outgoing.sender == f"b+{tag}@news.example.org"
    message = parse(outgoing.data)
    assert message["X-Newsletter-Tag"] == tag
    assert read_tag(SECRET, tag) == 4242
    assert "li.lei" not in outgoing.sender
    # Without an outbox row (build, preview, dry run) the plain return path, no tag.
    plain = factory.build(reader())
    assert plain.sender == "b@news.example.org"
    assert "X-Newsletter-Tag" not in parse(plain.data)
    # Without [bounces] return_path, bounces go to the From address as before.
    assert (
        MessageFactory(rendered(), settings, "main", secret=SECRET)
        .build(reader(), None, 4242)
        .sender
        == "digest@news.example.org"
    )
