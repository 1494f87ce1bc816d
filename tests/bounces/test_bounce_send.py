"""The send protects the sender: refusals at send time are bounces, and a run whose hard bounces
pass the limit stops (exit 4) and resumes when re-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.sendcli import environment, newsletter, sqlite_states, write_list
from support.smtp import Fault, FaultyHandler, start

DEAD = {f"reader{i:05d}@example.com" for i in range(10, 20)}
POLICY = "reader00003@example.com"  # refused for what the message looked like, not the address


def faults() -> list[Fault]:
    return [
        Fault(
            "rcpt",
            reply="550 5.1.1 <x>: Recipient address rejected: User unknown",
            match=DEAD.__contains__,
        ),
        Fault("data", reply="550 5.7.1 Message rejected as spam", match=POLICY.__eq__),
    ]


@pytest.mark.slow
async def test_refusals_suppress_and_the_rate_guard_stops_the_run(project: Path) -> None:
    readers = write_list(project / "list.csv", 40)
    handler = FaultyHandler(faults())
    env_extra = {
        "NEWSLETTER_LISTS__MAIN__PATH": "list.csv",
        "NEWSLETTER_BOUNCES__MIN_SAMPLE": "10",
    }
    async with start(handler) as server:
        env = environment(server.port, **env_extra)
        first = await newsletter(["send", "--issue", "14", "--yes", "--rate", "25"], env, project)
        assert first.code == 4, first.out + first.err
        assert "hard bounces are at" in first.out + first.err
        assert "stopped to protect the sender's reputation" in first.out + first.err
        got_first = set(handler.by_recipient)
        assert len(got_first) < len(readers) - len(DEAD)  # it did stop before the end

        # The editor looked, and lets the rest go: the same command resumes.
        env["NEWSLETTER_BOUNCES__MAX_HARD_RATE"] = "1"
        second = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        status = await newsletter(["status", "--issue", "14"], env, project)
        listed = await newsletter(["suppressions"], env, project)
    assert second.code == 3, second.out + second.err  # some recipients were rejected
    assert set(handler.by_recipient) == set(readers) - DEAD - {POLICY}
    assert set(handler.by_message_id.values()) == {1}  # nobody got two copies
    suppressed = {line.split()[2] for line in listed.out.splitlines()}
    assert suppressed == DEAD  # 5.1.1 at RCPT: bounced; 5.7.1 (policy) suppresses nobody
    assert all(line.endswith("bounced") for line in listed.out.splitlines())
    assert "bounced   10 (25.0% of 40 answered), and 1 soft" in status.out
    assert "complained 0 (0.00% of 29 sent)" in status.out


MESSAGE_REFUSALS = {
    "reader00001@example.com": ("data", "554 5.6.0 Message content rejected"),
    "reader00004@example.com": ("data", "554 Transaction failed"),
    "reader00007@example.com": ("rcpt", "500 Error: bad syntax"),
    "reader00010@example.com": ("data", "550 5.3.0 Mail system full"),
    "reader00013@example.com": ("data", "554 5.5.0 protocol error"),
}
GONE = "reader00016@example.com"


@pytest.mark.slow
async def test_a_relay_refusing_the_message_keeps_its_readers(project: Path) -> None:
    # Issue 29, point 10: content (5.6.x), protocol (5.5.x), system (5.3.x) and bare codes say
    # nothing about the address: the rows fail with the reason, nobody is suppressed, and the
    # rate guard does not count them as hard bounces. A 5.1.1 still suppresses.
    write_list(project / "list.csv", 30)
    faults = [
        Fault(stage, reply=reply, match=reader.__eq__)
        for reader, (stage, reply) in MESSAGE_REFUSALS.items()
    ]
    faults.append(Fault("rcpt", reply="550 5.1.1 <x>: User unknown", match=GONE.__eq__))
    handler = FaultyHandler(faults)
    env_extra = {
        "NEWSLETTER_LISTS__MAIN__PATH": "list.csv",
        "NEWSLETTER_BOUNCES__MIN_SAMPLE": "10",
        "NEWSLETTER_SEND__CONCURRENCY": "1",  # in list order: the refusals are not in a row
    }
    async with start(handler) as server:
        env = environment(server.port, **env_extra)
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        listed = await newsletter(["suppressions"], env, project)
    assert done.code == 3, done.out + done.err  # finished, some recipients failed
    assert "failed: reader00001@example.com 554 5.6.0 Message content rejected" in done.out
    assert "failed: reader00004@example.com 554 Transaction failed" in done.out
    assert "hard bounces are at" not in done.out + done.err
    states = {r: s for r, (s, _) in sqlite_states(project).items()}
    assert {r for r, s in states.items() if s == "failed"} == set(MESSAGE_REFUSALS)
    assert states[GONE] == "rejected"
    assert [line.split()[2] for line in listed.out.splitlines()] == [GONE]


@pytest.mark.slow
async def test_a_message_every_relay_refuses_stops_the_run(project: Path) -> None:
    # The same refusal for every reader is the message's problem: the run stops (exit 4) after
    # `breaker_threshold` in a row, suppressing nobody; once fixed, --retry-failed sends them.
    readers = write_list(project / "list.csv", 30)
    refusal = Fault("data", reply="554 5.6.0 Message content rejected")
    handler = FaultyHandler([refusal])
    env = {
        "NEWSLETTER_LISTS__MAIN__PATH": "list.csv",
        "NEWSLETTER_BOUNCES__MIN_SAMPLE": "1",
        "NEWSLETTER_SEND__CONCURRENCY": "1",
    }
    async with start(handler) as server:
        env = environment(server.port, **env)
        stopped = await newsletter(["send", "--issue", "14", "--yes"], env, project)
        listed = await newsletter(["suppressions"], env, project)
        handler.faults.clear()
        again = await newsletter(["send", "--issue", "14", "--yes", "--retry-failed"], env, project)
    assert stopped.code == 4, stopped.out + stopped.err
    assert "the server refused the message itself 5 times in a row" in stopped.err
    assert "554 5.6.0 Message content rejected" in stopped.err
    assert listed.out.strip() == ""
    assert sum(refusal.used.values()) < len(readers)  # it stopped before failing everyone
    assert again.code == 0, again.out + again.err
    assert set(handler.by_recipient) == set(readers)
    assert {s for s, _ in sqlite_states(project).values()} == {"sent"}
