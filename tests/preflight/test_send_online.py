"""`newsletter send` runs the online checks too when `[check] online` is on (issue 21.1): a real
subprocess send against the DNS and web servers on 127.0.0.1 and a real SMTP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.dnszone import ZoneResolver, closed_port
from support.onlineproject import configure, write_issue
from support.sendcli import environment, newsletter
from support.smtp import FaultyHandler, start
from support.websites import Site

STAGING = ["send", "--issue", "15", "--list", "staging"]


@pytest.mark.slow
async def test_a_broken_link_online_refuses_the_send_and_offline_lets_it_go(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base, online=True)
    missing = http_site.url("/missing?send")
    write_issue(project, 15, {"好": [http_site.url("/ok?send")], "坏": [missing]})
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        refused = await newsletter(STAGING, env, project)
        assert handler.received == []
        offline = await newsletter([*STAGING, "--offline"], env, project)
    assert refused.code == 1, refused.err
    assert f"error: 「坏」 in 「项目」: {missing}: 404 [link-check]" in refused.err
    assert "refusing to send issue 15 to the 'staging' list" in refused.err
    assert "Traceback" not in refused.err
    assert offline.code == 0, offline.err
    assert "[link-check]" not in offline.out + offline.err
    assert len(handler.by_recipient) == 2


@pytest.mark.slow
async def test_no_network_skips_the_online_checks_in_one_line_and_sends(
    project: Path, http_site: Site
) -> None:
    configure(project, nameserver=f"127.0.0.1:{closed_port()}", base_url=http_site.base)
    handler = FaultyHandler()
    async with start(handler) as server:
        done = await newsletter(
            ["send", "--issue", "14", "--list", "staging", "--online"],
            environment(server.port),
            project,
        )
    assert done.code == 0, done.err
    skipped = [line for line in done.out.splitlines() if "online checks skipped" in line]
    assert len(skipped) == 1
    assert skipped[0].startswith("online checks skipped: no answer from 127.0.0.1:")
    assert len(handler.by_recipient) == 2
