"""`newsletter doctor` on where bounces and complaints come from, and on the signup page (issues
40 and 41), through the real command (a subprocess, --json): a provider's webhook with its key
is a bounce source (no "no [bounces] imap" then); a key set for a provider [webhooks] relay does
not name, or a relay named without its key, is a finding; a claimed event is said to have been
received (a claim is not an application); and what /signup answers when no list has
`signup = true`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from newsletter.config.settings import load_settings
from newsletter.database import open_project_database
from support.doctoring import doctor_env, run_doctor

SENDGRID = {
    "NEWSLETTER_WEBHOOKS__RELAY": "sendgrid",
    "NEWSLETTER_WEBHOOK_SENDGRID_KEY": "a-verification-key",
}


@pytest.mark.slow
async def test_a_providers_webhook_with_its_key_is_a_bounce_source(project: Path) -> None:
    _, checks = await run_doctor(project, doctor_env(**SENDGRID))
    assert checks["mailbox"]["ok"] is True, checks["mailbox"]
    assert checks["mailbox"]["detail"] == (
        "no [bounces] imap: bounces and complaints come by sendgrid's webhook (the webhook line)"
    )
    assert "webhook.relay" not in checks
    assert checks["webhook"]["ok"] is False  # and whether its events come is that line's
    assert "no outbox yet" in str(checks["webhook"]["detail"])

    # Neither imap nor a webhook that answers: no bounce source at all.
    _, checks = await run_doctor(project, doctor_env(NEWSLETTER_WEBHOOKS__RELAY="sendgrid"))
    assert checks["mailbox"]["ok"] is False
    assert checks["webhook"]["ok"] is False
    assert checks["webhook"]["detail"] == (
        '[webhooks] relay is "sendgrid" but NEWSLETTER_WEBHOOK_SENDGRID_KEY is not set:'
        " https://news.example.org/webhooks/sendgrid answers 404, so no bounce or complaint"
        " of it reaches us"
    )


@pytest.mark.slow
async def test_a_key_for_a_provider_the_relay_setting_does_not_name_is_a_finding(
    project: Path,
) -> None:
    mailgun = {"NEWSLETTER_WEBHOOK_MAILGUN_KEY": "a-signing-key"}
    code, checks = await run_doctor(project, doctor_env(**mailgun))
    assert code == 1
    stray = checks["webhook.relay"]
    assert stray["ok"] is False
    assert stray["detail"] == (
        "NEWSLETTER_WEBHOOK_MAILGUN_KEY set, but [webhooks] relay is not set: the messages"
        " carry no tag mailgun echoes, so its bounces and complaints are tied to no reader"
    )
    assert '[webhooks] relay = "mailgun"' in str(stray["fix"])
    assert "a-signing-key" not in str(checks)
    assert checks["mailbox"]["ok"] is False  # a key alone is no bounce source

    _, checks = await run_doctor(project, doctor_env(**SENDGRID, **mailgun))
    assert 'relay is "sendgrid"' in str(checks["webhook.relay"]["detail"])
    assert checks["mailbox"]["ok"] is True  # sendgrid's is

    config = project / "newsletter.toml"
    topics = '\n[webhooks]\nses_topics = ["arn:aws:sns:us-east-1:1:bounces"]\n'
    config.write_text(config.read_text(encoding="utf-8") + topics, encoding="utf-8")
    _, checks = await run_doctor(project, doctor_env())
    assert str(checks["webhook.relay"]["detail"]).startswith(
        "[webhooks] ses_topics set, but [webhooks] relay is not set"
    )


@pytest.mark.slow
async def test_a_claimed_event_is_said_to_be_received_not_applied(project: Path) -> None:
    env = doctor_env(**SENDGRID)
    settings = load_settings(project / "newsletter.toml", env)
    with open_project_database(settings) as database:
        # What serve does first with a signed event: claim its id (applying it is the next step).
        database.webhook_events.claim("sendgrid", "evt-1", time.time())
    _, checks = await run_doctor(project, env)
    hook = checks["webhook"]
    assert hook["ok"] is True, hook
    assert str(hook["detail"]).startswith("sendgrid: the last signed event was received at ")
    assert "applied" not in str(hook["detail"])


@pytest.mark.slow
async def test_doctor_says_what_signup_answers(project: Path) -> None:
    _, checks = await run_doctor(project, doctor_env())
    assert checks["signup"]["ok"] is True
    assert checks["signup"]["detail"] == (
        "off: no list has signup = true, so https://news.example.org/signup answers 404 (Page"
        " not found); set signup = true in a [lists.NAME] table for the signup page"
    )
    _, checks = await run_doctor(project, doctor_env(NEWSLETTER_LISTS__MAIN__SIGNUP="true"))
    assert checks["signup"]["detail"] == (
        "https://news.example.org/signup: readers may sign up to main"
    )
