"""Amazon SES events through SNS, to the running site: the certificate comes only from an SNS
host (the tests' fetch stands in for the network, serving a certificate the test made), the
signature covers the documented fields, a subscription is confirmed only for a configured
topic, and a bounce or complaint is applied once through the bounce policy."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from newsletter.bounces.verp import make_tag
from newsletter.database import Database, open_database
from newsletter.models import DeliveryStatus
from support.database import due, plan, record
from support.site import ALICE, SECRET, RunningService, running_service

TOPIC = "arn:aws:sns:us-east-1:123456789012:newsletter-bounces"
CERT_URL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123456789.pem"
SUBSCRIBE_URL = (
    "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn="
    + TOPIC
    + "&Token=2336412f37"
)
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
NAME = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
CERT = (
    x509.CertificateBuilder()
    .subject_name(NAME)
    .issuer_name(NAME)
    .public_key(KEY.public_key())
    .serial_number(x509.random_serial_number())
    .not_valid_before(dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    .not_valid_after(dt.datetime(2040, 1, 1, tzinfo=dt.UTC))
    .sign(KEY, hashes.SHA256())
    .public_bytes(serialization.Encoding.PEM)
)
SIGNED = {
    "Notification": ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"],
    "SubscriptionConfirmation": [
        *["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    ],
}


class Network:
    """The fetches SES's webhook makes: the certificate served, every URL asked noted."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.asked.append(url)
        if url == CERT_URL:
            return CERT
        if url == SUBSCRIBE_URL:
            return b"<ConfirmSubscriptionResponse/>"
        raise OSError(f"no network in tests ({url})")


@pytest.fixture
def network() -> Network:
    return Network()


@pytest.fixture
def service(project: Path, network: Network) -> Iterator[RunningService]:
    config = project / "newsletter.toml"
    config.write_text(config.read_text() + f'\n[webhooks]\nses_topics = ["{TOPIC}"]\n')
    with running_service(project, fetch=network) as running:
        yield running


def sns(kind: str, *, when: dt.datetime | None = None, version: str = "2", **fields: str) -> bytes:
    """An SNS message of `kind`, signed with the test certificate's key as SNS signs."""
    moment = when or dt.datetime.now(dt.UTC)
    data = {
        "Type": kind,
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": TOPIC,
        "Timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "SignatureVersion": version,
        "SigningCertURL": CERT_URL,
        **fields,
    }
    text = "".join(f"{k}\n{data[k]}\n" for k in SIGNED[kind] if k in data).encode()
    # SignatureVersion 1 is SHA1withRSA: SNS's default, so it must verify.
    digest = hashes.SHA256() if version == "2" else hashes.SHA1()  # noqa: S303
    data["Signature"] = base64.b64encode(KEY.sign(text, padding.PKCS1v15(), digest)).decode()
    return json.dumps(data).encode()


def ses_bounce(tag: str, event: str = "Bounce") -> str:
    """SES's documented event-publishing bounce (and complaint) sample, our tag in mail.tags."""
    mail = {
        "timestamp": "2017-08-05T00:40:02.012Z",
        "source": "Sender Name <sender@example.com>",
        "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
        "destination": [ALICE],
        "headersTruncated": False,
        "tags": {"ses:configuration-set": ["ConfigSet"], "newsletter_tag": [tag]},
    }
    if event == "Bounce":
        detail = {
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [
                    {
                        "emailAddress": ALICE,
                        "action": "failed",
                        "status": "5.1.1",
                        "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                    }
                ],
                "timestamp": "2017-08-05T00:41:02.669Z",
                "reportingMTA": "dsn; mta.example.com",
            }
        }
    else:
        detail = {
            "complaint": {
                "complainedRecipients": [{"emailAddress": ALICE}],
                "timestamp": "2017-08-05T00:41:02.669Z",
                "complaintFeedbackType": "abuse",
            }
        }
    return json.dumps({"eventType": event, **detail, "mail": mail})


def post(service: RunningService, body: bytes, kind: str = "Notification") -> httpx.Response:
    # SNS posts text/plain by default.
    headers = {"x-amz-sns-message-type": kind, "content-type": "text/plain; charset=UTF-8"}
    return httpx.post(f"{service.url}/webhooks/ses", content=body, headers=headers)


def sent_to(database: Database) -> int:
    plan(database, 14, "main", [ALICE], {ALICE: "<14.alice@news.example.org>"})
    row = due(database, 14, "main")[0]
    record(database, row.id, DeliveryStatus.SENT, code=250, reply="ok")
    return row.id


def tag_and_state(service: RunningService) -> str:
    with open_database(service.settings.database_target) as database:
        return make_tag(SECRET.encode(), sent_to(database))


def stored(service: RunningService) -> tuple[list[str], list[tuple[str, ...]]]:
    with open_database(service.settings.database_target) as database:
        found = database.suppressions.get("main", ALICE)
        reports = database.backend.fetch("SELECT report, kind, source FROM bounce_reports")
    return ([found.source] if found else []), [tuple(r) for r in reports]


def test_a_subscription_is_confirmed_only_for_the_configured_topic(
    service: RunningService, network: Network
) -> None:
    confirm = {"Message": "You have chosen to subscribe", "Token": "2336412f37"}
    stranger = sns(
        "SubscriptionConfirmation",
        SubscribeURL=SUBSCRIBE_URL,
        **confirm,
    ).replace(TOPIC.encode(), b"arn:aws:sns:us-east-1:666:theirs")
    assert post(service, stranger, "SubscriptionConfirmation").status_code == 401
    assert service.wait_for_log("is not in [webhooks] ses_topics")
    assert network.asked == []  # a stranger's topic costs no fetch
    ours = sns("SubscriptionConfirmation", SubscribeURL=SUBSCRIBE_URL, **confirm)
    assert post(service, ours, "SubscriptionConfirmation").status_code == 200
    assert network.asked == [CERT_URL, SUBSCRIBE_URL]


def test_an_ses_bounce_suppresses_once_and_a_complaint_too(service: RunningService) -> None:
    tag = tag_and_state(service)
    body = sns("Notification", Message=ses_bounce(tag), version="1")
    assert post(service, body).status_code == 200
    assert post(service, body).status_code == 200  # SNS retries: applied once
    expected = ("ses:22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "hard", "webhook:ses")
    assert stored(service) == (["bounced"], [expected])
    complaint = sns("Notification", Message=ses_bounce(tag, "Complaint"), MessageId="c-1")
    assert post(service, complaint).status_code == 200
    assert stored(service)[1][-1] == ("ses:c-1", "complaint", "webhook:ses")


@pytest.mark.slow
def test_forged_stale_or_foreign_certificate_messages_change_nothing(
    service: RunningService, network: Network
) -> None:
    tag = tag_and_state(service)
    forged = sns("Notification", Message=ses_bounce(tag)).replace(b"Permanent", b"Transient")
    assert post(service, forged).status_code == 401
    assert service.wait_for_log("does not verify with the SNS certificate")
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    assert post(service, sns("Notification", Message=ses_bounce(tag), when=old)).status_code == 401
    assert service.wait_for_log("(a replay?)")
    for url in (
        "http://sns.us-east-1.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com.evil.example/cert.pem",
        "https://sns.us-east-1.amazonaws.com:8443/cert.pem",
    ):
        body = sns("Notification", Message=ses_bounce(tag)).replace(CERT_URL.encode(), url.encode())
        assert post(service, body).status_code == 401
    assert all(url == CERT_URL for url in network.asked)
    wrong_type = sns("Notification", Message=ses_bounce(tag))
    assert post(service, wrong_type, "SubscriptionConfirmation").status_code == 400
    assert stored(service) == ([], [])
