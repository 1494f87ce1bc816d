"""dburl: what libpq reads as a secret in a PostgreSQL URL is never shown; held to libpq's own
parser (PQconninfoParse, through psycopg) and to its list of keywords."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from newsletter.config.dburl import (
    SECRET_KEYWORDS,
    SHOWN_KEYWORDS,
    check_unambiguous,
    redact_url,
    scrub,
    secret_parameters,
)

# Every way a URL can carry a secret to libpq; each secret is distinctive, so a test can look
# for it in what is shown.
CARRIERS = [
    "postgresql://nl:Sx1-pw@db/nl",
    "postgresql://:Sx2-pw@db/nl",
    "postgresql://nl:Sx3%40pw@db/nl",  # an escaped @ in the password
    "postgresql://nl:Sx5-pw@h1:5432,h2:5433/nl",  # several hosts (urlsplit cannot read it)
    "postgresql://db/nl?password=Sx6-pw",
    "postgresql://db?password=Sx7-pw",
    "postgres://db/nl?application_name=a&password=Sx8-pw",
    "postgresql://db/nl?pass%77ord=Sx9-pw",  # libpq decodes the name too
    "postgresql://db/nl? password =Sx10-pw",  # and drops spaces around it
    "postgresql://db/nl?password=%20Sx11-pw%20",
    "postgresql://db/nl?password=Sx12-first&password=Sx12-second",  # the last one wins
    "postgresql://db/nl?sslpassword=Sx13-pw",
    "postgresql://db/nl?oauth_client_secret=Sx14-pw",
    "postgresql://db/nl?scram_client_key=Sx15-pw",
    "postgresql://db/nl?scram_server_key=Sx16-pw",
    "postgresql://[::1]:5432/nl?password=Sx17-pw",
]
HARMLESS = [
    "postgresql://nl@db:5432/nl",
    "postgresql://nl@db/nl?sslmode=require&application_name=newsletter",
    "postgresql://db/nl?passfile=/etc/newsletter/pgpass&options=-csearch_path%3Dnl",
    "postgresql://nl:@db/nl",  # an empty password is no password to libpq
    "postgresql://db/nl?password=",
]


def libpq_secrets(url: str) -> dict[str, str]:
    return {k: v for k, v in conninfo_to_dict(url).items() if k in SECRET_KEYWORDS and v}


def test_every_libpq_keyword_is_known_and_every_hidden_one_is_a_secret() -> None:
    """A libpq upgrade with a new keyword fails here until it is sorted: shown, or secret."""
    options = {o.keyword.decode(): o.dispchar.decode() for o in pq.Conninfo.get_defaults()}
    assert set(options) <= SECRET_KEYWORDS | SHOWN_KEYWORDS
    assert {k for k, dispchar in options.items() if dispchar == "*"} <= SECRET_KEYWORDS
    assert not SECRET_KEYWORDS & SHOWN_KEYWORDS


@pytest.mark.parametrize("url", CARRIERS)
def test_every_secret_libpq_reads_is_found_and_masked(url: str) -> None:
    secrets = libpq_secrets(url)
    assert secrets, "the corpus must hold a secret libpq reads"
    shown = redact_url(url)
    assert "Sx" not in shown
    assert "***" in shown
    assert secret_parameters(url)
    assert check_unambiguous(url) == url


@pytest.mark.parametrize("url", HARMLESS)
def test_a_url_without_secrets_is_shown_as_written(url: str) -> None:
    assert not libpq_secrets(url)
    assert secret_parameters(url) == []
    # The place of a password is masked even when empty: nothing to hide, nothing to tell.
    assert redact_url(url) == url.replace("nl:@", "nl:***@").replace("password=", "password=***")


def test_what_stays_visible_is_what_helps() -> None:
    url = "postgresql://nl:Sx-pw@db.internal:5432/newsletter?sslmode=verify-full&password=Sx"
    assert redact_url(url) == (
        "postgresql://nl:***@db.internal:5432/newsletter?sslmode=verify-full&password=***"
    )
    assert secret_parameters(url) == ["user:PASSWORD@", "password="]
    # A name libpq does not know may be a misspelt secret: its value is masked too.
    assert redact_url("postgresql://db/nl?passwd=Sx-pw") == "postgresql://db/nl?passwd=***"
    assert redact_url("/srv/newsletter/.newsletter/outbox.sqlite3").endswith("outbox.sqlite3")


@pytest.mark.parametrize(
    ("url", "quoted"),
    [
        # libpq's own messages quote the raw value of a parameter it cannot decode.
        ("postgresql://db/nl?password=%zzSx-secret", "%zzSx-secret"),
        ("postgresql://db/nl?password=Sx secret", "Sx secret"),
        ("postgresql://nl:%zzSx-secret@db/nl", "%zzSx-secret"),
    ],
)
def test_libpqs_messages_about_a_url_are_scrubbed_of_its_secrets(url: str, quoted: str) -> None:
    with pytest.raises(psycopg.ProgrammingError) as caught:
        conninfo_to_dict(url)
    message = str(caught.value)
    assert quoted in message  # what libpq says, unscrubbed
    assert "Sx" not in scrub(message, url)
    assert "Sx" not in redact_url(url)


@pytest.mark.parametrize(
    ("url", "libpq_reads", "reason"),
    [
        # libpq ends the password at the first @: "Sx-tail" becomes part of the host name.
        ("postgresql://nl:Sx@Sx-tail@db/nl", {"host": "Sx-tail@db"}, "more than one @"),
        # An @ in the query ends a "user name" that starts at the host: the query is the user.
        ("postgresql://db?password=Sx-pw@x", {"user": "db?password=Sx-pw"}, "an @ after its ?"),
        # The same with a port: "1?password=Sx-pw" is the password, x the host.
        ("postgresql://db:1?password=Sx-pw@x", {"password": "1?password=Sx-pw"}, "an @ after"),
    ],
)
def test_a_url_libpq_reads_otherwise_than_it_looks_is_refused_and_masked(
    url: str, libpq_reads: dict[str, str], reason: str
) -> None:
    parsed = conninfo_to_dict(url)
    assert libpq_reads.items() <= parsed.items()
    with pytest.raises(ValueError, match=reason) as caught:
        check_unambiguous(url)
    assert "Sx" not in str(caught.value)
    assert "Sx" not in redact_url(url)
    message = f'failed to resolve host "{parsed.get("host")}" for user "{parsed.get("user")}"'
    assert "Sx" not in scrub(message, url)
