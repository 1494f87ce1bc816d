"""The send protects the sender: refusals at send time are bounces, and a run whose hard bounces
pass the limit stops (exit 4) and resumes when re-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.sendcli import environment, newsletter, write_list
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
