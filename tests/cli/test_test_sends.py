"""Test sends repeat (issue 21.2) and `status` shows what an issue brought back (21.5): real
subprocess runs against real SMTP, on SQLite and PostgreSQL; a killed test resumed; the links of
a repeated test still unsubscribe in `serve`."""

from __future__ import annotations

import asyncio
import email
import email.policy
import signal
from pathlib import Path

import httpx
import pytest

from newsletter.config.settings import load_settings
from newsletter.database import open_database
from newsletter.database.records import now
from newsletter.database.testsends import TestSend
from newsletter.models import DeliveryStatus
from newsletter.send.testsend import decide
from support.database import plan
from support.sendcli import environment, finish, newsletter, spawn, wait_for, write_list
from support.site import SECRET, running_service
from support.smtp import Fault, FaultyHandler, start

STAGING = ["send", "--issue", "14", "--list", "staging"]


def edit_title(project: Path, title: str) -> None:
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("title: AI系统内容推荐第14期", f"title: {title}", 1), encoding="utf-8"
    )


def subjects(handler: FaultyHandler) -> list[str]:
    return [
        str(email.message_from_bytes(r.data, policy=email.policy.default)["Subject"])
        for r in handler.received
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def outbox_env(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    url = request.getfixturevalue("postgres_url")
    return {"NEWSLETTER_OUTBOX__URL": url}


@pytest.mark.slow
async def test_a_changed_test_goes_out_again_an_unchanged_one_does_not(
    project: Path, outbox_env: dict[str, str]
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port, **outbox_env)
        first = await newsletter(STAGING, env, project)
        unchanged = await newsletter(STAGING, env, project)
        edit_title(project, "AI系统内容推荐第14期（修订）")
        changed = await newsletter(STAGING, env, project)
        again = await newsletter([*STAGING, "--again"], env, project)
        real = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        real_again = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        status = await newsletter(["status", "--issue", "14"], env, project)
    for done in (first, unchanged, changed, again, real, real_again):
        assert done.code == 0, done.err
    assert "2 sent by this run" in first.out
    assert "unchanged since the test at " in unchanged.out
    assert "(test 1, 2 of 2 sent): nothing sent; --again sends it again" in unchanged.out
    assert "planned:" not in unchanged.out
    assert "changed since the test at " in changed.out
    assert ": sending again" in changed.out
    assert "2 sent by this run" in changed.out
    assert "--again: sending the test at " in again.out
    assert "2 sent by this run" in again.out
    # A real list: exactly once, however often the command runs.
    assert "5 sent by this run" in real.out
    assert "0 sent by this run" in real_again.out
    staging = {"editor@news.example.org", "proofreader@news.example.org"}
    by_staging = {r: n for r, n in handler.by_recipient.items() if r in staging}
    assert by_staging == dict.fromkeys(staging, 3)
    # Each test is its own message: no Message-ID reached the server twice.
    assert max(handler.by_message_id.values()) == 1
    assert len(handler.by_message_id) == 3 * 2 + 5
    tested = [s for s in subjects(handler) if s.startswith("【测试】")]
    assert tested.count("【测试】AI系统内容推荐第14期") == 2
    assert tested.count("【测试】AI系统内容推荐第14期（修订）") == 4
    # status shows each test as a run of its own.
    assert "issue 14 -> staging: 2 recipients" in status.out
    assert "  test 1    at " in status.out
    assert ": 2 of 2 sent" in status.out
    assert ", the message changed: 2 of 2 sent" in status.out
    assert ", --again: the counts above" in status.out
    assert "issue 14 -> main: 5 recipients" in status.out
    main = status.out.split("issue 14 -> main")[1].split("issue 14 -> staging")[0]
    assert "  test " not in main


@pytest.mark.slow
async def test_a_killed_test_is_resumed_not_begun_again(
    project: Path, outbox_env: dict[str, str]
) -> None:
    addresses = write_list(project / "big.csv", 120)
    handler = FaultyHandler([Fault("data", sleep=0.01)])
    # On PostgreSQL the rows the dead run claimed wait for its lease to expire.
    lease = {"NEWSLETTER_SEND__LEASE": "5"} if outbox_env else {}
    async with start(handler) as server:
        env = environment(
            server.port, NEWSLETTER_LISTS__STAGING__PATH="big.csv", **outbox_env, **lease
        )
        args = [*STAGING, "--concurrency", "4"]
        first = await newsletter(args, env, project)
        assert first.code == 0, first.err
        edit_title(project, "AI系统内容推荐第14期（二稿）")
        proc = await spawn(args, env, project)
        await wait_for(handler, 120 + 30)
        proc.kill()
        killed = await finish(proc)
        assert killed.code == -signal.SIGKILL
        await asyncio.sleep(0.3)  # the uploads the dead run left finish on the server
        resumed = await newsletter(args, env, project)
        done = await newsletter(args, env, project)
        status = await newsletter(["status", "--issue", "14", "--list", "staging"], env, project)
    assert resumed.code in (0, 3), resumed.err
    assert "resuming the test at " in resumed.out
    assert "(test 2)" in resumed.out
    assert "unchanged since the test at " in done.out
    settings = load_settings(project / "newsletter.toml", environ=outbox_env)
    with open_database(settings.database_target) as database:
        tests = database.test_sends.history(14, "staging")
        rows = {r.recipient: r for r in database.deliveries.rows(14, "staging")}
    assert [t.round for t in tests] == [1, 2]
    assert tests[0].sent == tests[0].recipients == 120
    assert sorted(rows) == sorted(addresses)
    # The second test reached each reader at most once (and the killed run's in-doubt uploads
    # are `unknown`, reported, not resent).
    second = [
        r
        for r in handler.received
        if "二稿" in str(email.message_from_bytes(r.data, policy=email.policy.default)["Subject"])
    ]
    per_reader: dict[str, int] = {}
    for r in second:
        for rcpt in r.recipients:
            per_reader[rcpt] = per_reader.get(rcpt, 0) + 1
    assert max(per_reader.values()) == 1
    assert max(handler.by_message_id.values()) == 1
    for recipient, row in rows.items():
        assert row.state in ("sent", "unknown"), (recipient, row.state)
        if row.state == "sent":
            assert per_reader.get(recipient) == 1
    assert "test 2    at " in status.out


@pytest.mark.slow
async def test_a_repeated_tests_unsubscribe_link_still_verifies_in_serve(project: Path) -> None:
    with running_service(project) as service:
        handler = FaultyHandler()
        async with start(handler) as server:
            env = environment(
                server.port,
                NEWSLETTER_SECRET=SECRET,
                NEWSLETTER_NEWSLETTER__BASE_URL=service.url,
            )
            assert (await newsletter(STAGING, env, project)).code == 0
            again = await newsletter([*STAGING, "--again"], env, project)
        assert again.code == 0, again.err
        latest = email.message_from_bytes(handler.received[-1].data, policy=email.policy.default)
        header = str(latest["List-Unsubscribe"])
        url = next(p.strip("<> ") for p in header.split(",") if "/unsubscribe/" in p)
        assert url.startswith(f"{service.url}/unsubscribe/")
        answer = await asyncio.to_thread(
            httpx.post, url, data={"List-Unsubscribe": "One-Click"}, follow_redirects=False
        )
        assert answer.status_code == 200
        with open_database(service.settings.database_target) as database:
            found = [(s.list, s.source) for s in database.suppressions.all()]
    assert found == [("staging", "one-click")]


@pytest.mark.slow
async def test_status_counts_the_unsubscribes_and_complaints_an_issue_brought(
    project: Path, outbox_env: dict[str, str]
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port, **outbox_env)
        assert (await newsletter(["send", "--issue", "14", "--yes"], env, project)).code == 0
        settings = load_settings(project / "newsletter.toml", environ=env)
        with open_database(settings.database_target) as database:
            rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
            # A reader's one-click after issue 14 reached them, and a complaint about it.
            database.suppressions.add("main", "li.lei@example.com", "one-click")
            database.suppressions.add("main", "bob@example.net", "web")
            complained = rows["alice@example.net"]
            database.backend.run(
                "INSERT INTO bounce_reports (report, delivery_id, kind, source, created_at)"
                " VALUES (?, ?, 'complaint', 'arf', ?)",
                ("<report-1@example.org>", complained.id, now()),
            )
        status = await newsletter(["status", "--issue", "14", "--list", "main"], env, project)
    assert status.code == 0, status.err
    assert "  complained 1 (20.00% of 5 sent)" in status.out
    assert "  unsubscribed 2 (40.00% of 5 sent)" in status.out


def _test(number: int, fingerprint: str = "f1") -> TestSend:
    return TestSend(number, fingerprint, "2026-12-01T10:42:00.000+00:00", "first")


def test_the_rule_of_a_test_send() -> None:
    first = decide(None, {}, "f1", again=False)
    assert (first.go, first.round, first.begin) == (True, 1, True)
    done = {DeliveryStatus.SENT: 2}
    same = decide(_test(1), done, "f1", again=False, when="10:42")
    assert not same.go
    assert same.message.startswith("unchanged since the test at 10:42 (test 1, 2 of 2 sent)")
    changed = decide(_test(1), done, "f2", again=False, when="10:42")
    assert (changed.go, changed.round, changed.begin, changed.after) == (True, 2, True, 1)
    assert changed.message == "changed since the test at 10:42: sending again"
    again = decide(_test(3), done, "f1", again=True)
    assert (again.go, again.round, again.begin) == (True, 4, True)
    # Not finished (killed, or deferred rows): the same message resumes the same test.
    sent, pending, sending = DeliveryStatus.SENT, DeliveryStatus.PENDING, DeliveryStatus.SENDING
    waitings: list[dict[DeliveryStatus, int]] = [{sent: 1, pending: 1}, {sent: 1, sending: 1}, {}]
    for waiting in waitings:
        resumed = decide(_test(2), waiting, "f1", again=False)
        assert (resumed.go, resumed.round, resumed.begin) == (True, 2, False)
    # A log from before tests repeated: no fingerprint; a finished one goes out again.
    legacy = decide(_test(1, ""), done, "f1", again=False)
    assert (legacy.go, legacy.round) == (True, 2)
    legacy_waiting = decide(_test(1, ""), {DeliveryStatus.PENDING: 2}, "f1", again=False)
    assert (legacy_waiting.round, legacy_waiting.begin) == (1, False)


def test_beginning_a_test_is_done_once_and_reopens_the_rows(
    database_target: Path | str,
) -> None:
    with open_database(database_target) as database:
        database.leases.register("w1", 14, "staging", "here", 1, 60.0)
        plan(database, 14, "staging", ["a@example.org", "b@example.org"], planner="w1")
        assert database.plans.is_current(14, "staging")
        tests = database.test_sends
        assert tests.latest(14, "staging") is not None  # the rows of a log from before
        begun = tests.begin(14, "staging", "f2", "changed", after=1)
        assert begun is not None
        assert begun.round == 2
        # A second worker deciding on the same latest test begins nothing.
        assert tests.begin(14, "staging", "f2", "changed", after=1) is None
        history = tests.history(14, "staging")
        assert [(t.round, t.fingerprint, t.recipients) for t in history] == [
            (1, "", 2),
            (2, "f2", None),
        ]
        assert {r.state for r in database.deliveries.rows(14, "staging")} == {"pending"}
        assert {r.message_id for r in database.deliveries.rows(14, "staging")} == {None}
        # The live worker's plan was of the last test: the next one plans afresh.
        assert not database.plans.is_current(14, "staging")
