"""Unsigned SES posts cannot lock out the site (issue 40, point 10): the running site, SNS
played by a real HTTP server on loopback that holds each request until the test releases it
(support/certserver.py; the site reaches it through create_app's `fetch`). A certificate name
not shaped as SNS names them costs no fetch; posts naming one certificate share one fetch and
its failure is kept; while fetches are held the archive index still answers; a SubscribeURL
that cannot be had is a clean 503 and one log line, no traceback."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from newsletter.web.site.hooks import WEBHOOK_THREADS
from newsletter.webhooks.ses import MAX_FETCHES
from support.certserver import HOLD_AT_MOST, HeldSns, held_sns
from support.hooks import SNS_CERT_URL, SNS_TOPIC, Sns
from support.site import RunningService, running_service

WAITING = "waiting for the fetch under way"  # ses.py's debug line for a post that waits
DELIVERY = {"eventType": "Delivery", "mail": {"messageId": "m-1"}}  # verified, then no event
CERT_PATH = urlsplit(SNS_CERT_URL).path
PAGE_TIMEOUT = HOLD_AT_MOST / 2  # a page waiting for a held fetch fails before the hold ends


@contextmanager
def serving(project: Path, held: HeldSns) -> Iterator[RunningService]:
    """The site with SES on, its network the held server."""
    config = project / "newsletter.toml"
    config.write_text(config.read_text() + f'\n[webhooks]\nses_topics = ["{SNS_TOPIC}"]\n')
    with running_service(project, fetch=held.fetch) as running:
        yield running


@contextmanager
def posting(held: HeldSns, workers: int) -> Iterator[ThreadPoolExecutor]:
    """Threads to post from; the server is released before the pool waits for its posts."""
    with ThreadPoolExecutor(workers) as pool:
        try:
            yield pool
        finally:
            held.release()


def post(service: RunningService, body: bytes, kind: str = "Notification") -> int:
    headers = {"x-amz-sns-message-type": kind, "content-type": "text/plain; charset=UTF-8"}
    url = f"{service.url}/webhooks/ses"
    return httpx.post(url, content=body, headers=headers, timeout=HOLD_AT_MOST * 2).status_code


def naming(body: bytes, url: str) -> bytes:
    """`body` naming the certificate `url` (SigningCertURL is not among the signed fields)."""
    return body.replace(SNS_CERT_URL.encode(), url.encode())


def lines(service: RunningService, text: str) -> int:
    return sum(text in line for line in list(service.log.lines))


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def confirmation(sns: Sns, subscribe_url: str) -> bytes:
    """A SubscriptionConfirmation for SNS_TOPIC signed (SignatureVersion 2) as SNS signs one."""
    moment = dt.datetime.now(dt.UTC)
    data = {
        "Type": "SubscriptionConfirmation",
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": "2336412f37",
        "TopicArn": SNS_TOPIC,
        "Message": f"You have chosen to subscribe to the topic {SNS_TOPIC}.",
        "SubscribeURL": subscribe_url,
        "Timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "SignatureVersion": "2",
        "SigningCertURL": SNS_CERT_URL,
    }
    signed = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
    text = "".join(f"{k}\n{data[k]}\n" for k in signed).encode()
    signature = sns.key.sign(text, padding.PKCS1v15(), hashes.SHA256())
    data["Signature"] = base64.b64encode(signature).decode()
    return json.dumps(data).encode()


def test_a_certificate_name_not_shaped_as_sns_names_them_is_never_fetched(project: Path) -> None:
    sns = Sns()
    made_up = [
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x1.pem",  # the issue's
        "https://sns.us-east-1.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com/a/SimpleNotificationService-0123abcd.pem",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem?x=1",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem#x",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem.pem",
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-.pem",
    ]
    with held_sns(sns.certificate, held=False) as held, serving(project, held) as service:
        for n, url in enumerate(made_up):
            assert post(service, naming(sns.notification(DELIVERY, f"m-{n}"), url)) == 401, url
        assert service.wait_for_log("is not an SNS certificate")
        assert lines(service, "is not an SNS certificate") == len(made_up)
        assert held.asked == []  # refused before any fetch
        # The name SNS gives its certificates is fetched, and verifies.
        assert post(service, sns.notification(DELIVERY, "m-ok")) == 200
        assert held.asked == [CERT_PATH]
        # A well-made name SNS has no certificate for (404) is a forgery: 401, asked once.
        unknown = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem"
        for n in range(2):
            assert post(service, naming(sns.notification(DELIVERY, f"u-{n}"), unknown)) == 401
        assert held.asked == [CERT_PATH, urlsplit(unknown).path]


def test_posts_naming_one_certificate_wait_for_its_one_fetch(project: Path) -> None:
    sns = Sns()
    with (
        held_sns(sns.certificate) as held,
        serving(project, held) as service,
        posting(held, WEBHOOK_THREADS) as pool,
    ):
        bodies = [sns.notification(DELIVERY, f"d-{n}") for n in range(WEBHOOK_THREADS)]
        answers = [pool.submit(post, service, body) for body in bodies]
        assert held.wait_for_requests(1)
        assert wait_until(lambda: lines(service, WAITING) == WEBHOOK_THREADS - 1), (
            "the other posts did not wait for the fetch under way"
        )
        assert held.answered == 0
        held.release()
        assert [answer.result() for answer in answers] == [200] * WEBHOOK_THREADS
        assert held.asked == [CERT_PATH]  # one fetch, its certificate verified every post


def test_a_certificate_that_cannot_be_had_is_asked_for_once_per_burst(project: Path) -> None:
    sns = Sns()
    burst = 20
    with held_sns(None) as held, serving(project, held) as service, posting(held, burst) as pool:
        first = [
            pool.submit(post, service, sns.notification(DELIVERY, f"d-{n}"))
            for n in range(WEBHOOK_THREADS)
        ]
        assert held.wait_for_requests(1)
        assert wait_until(lambda: lines(service, WAITING) == WEBHOOK_THREADS - 1)
        held.release()
        # SNS retries a 5xx: the certificate could not be had now, which is not a forgery.
        assert [answer.result() for answer in first] == [503] * WEBHOOK_THREADS
        again = [
            pool.submit(post, service, sns.notification(DELIVERY, f"e-{n}")) for n in range(burst)
        ]
        assert [answer.result() for answer in again] == [503] * burst
        assert held.asked == [CERT_PATH]  # the failure was kept: no post asked again
        assert lines(service, "cannot be had") == WEBHOOK_THREADS + burst
        assert lines(service, "not asked again") == WEBHOOK_THREADS - 1 + burst


def test_the_archive_index_answers_while_a_flood_of_certificate_fetches_is_held(
    project: Path,
) -> None:
    sns = Sns()
    flood = 60  # the issue's: each post names a certificate of its own
    with held_sns(None) as held, serving(project, held) as service, posting(held, flood) as pool:
        bodies = [
            naming(
                sns.notification(DELIVERY, f"d-{n}"),
                f"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-{n:032x}.pem",
            )
            for n in range(flood)
        ]
        answers = [pool.submit(post, service, body) for body in bodies]
        assert wait_until(lambda: sum(a.done() for a in answers) + len(held.asked) == flood), (
            "posts neither answered nor held at SNS"
        )
        page = httpx.get(f"{service.url}/", timeout=PAGE_TIMEOUT)
        assert page.status_code == 200
        assert held.answered == 0  # the page came while every fetch was held
        assert len(held.asked) == MAX_FETCHES
        busy = [answer.result() for answer in answers if answer.done()]
        assert busy == [503] * (flood - MAX_FETCHES)  # SNS retries these later
        held.release()
        assert [answer.result() for answer in answers] == [503] * flood
        assert lines(service, "fetches are under way already") == flood - MAX_FETCHES


def test_the_archive_index_answers_while_posts_wait_for_a_held_certificate(
    project: Path,
) -> None:
    sns = Sns()
    flood = 60  # more than the page's own threads (anyio's 40)
    with held_sns(None) as held, serving(project, held) as service, posting(held, flood) as pool:
        bodies = [sns.notification(DELIVERY, f"d-{n}") for n in range(flood)]
        answers = [pool.submit(post, service, body) for body in bodies]
        assert held.wait_for_requests(1)
        assert wait_until(lambda: lines(service, WAITING) == WEBHOOK_THREADS - 1)
        page = httpx.get(f"{service.url}/", timeout=PAGE_TIMEOUT)
        assert page.status_code == 200
        assert held.answered == 0
        # The rest wait for a webhook thread, holding none.
        assert lines(service, WAITING) == WEBHOOK_THREADS - 1
        assert not any(answer.done() for answer in answers)
        held.release()
        assert [answer.result() for answer in answers] == [503] * flood
        assert held.asked == [CERT_PATH]


def test_a_subscribe_url_that_cannot_be_had_is_a_clean_503_and_one_line(project: Path) -> None:
    sns = Sns()
    subscribe = (
        f"https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn={SNS_TOPIC}"
        "&Token=2336412f37"
    )
    with held_sns(sns.certificate, held=False) as held, serving(project, held) as service:
        body = confirmation(sns, subscribe)
        assert post(service, body, "SubscriptionConfirmation") == 503  # SNS sends it again
        assert service.wait_for_log("the SubscribeURL cannot be had")
        assert held.asked == [CERT_PATH, urlsplit(subscribe).path + "?" + urlsplit(subscribe).query]
        found = [line for line in service.log.lines if "SubscribeURL" in line]
        assert len(found) == 1
        assert "HTTP Error 503" in found[0]
        assert "stays pending" in found[0]
        assert not any("Traceback" in line for line in service.log.lines)
