"""Deadlines: a link server that dribbles its headers a byte at a time (well within any read
timeout) is cut at `[check] timeout` per request, and the whole run at `[check] run_timeout`;
the links that ran out of time are named. A real slow server on 127.0.0.1 (websites.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.preflight import report
from newsletter.preflight.run import OnlineReport
from support.dnszone import ZoneResolver
from support.linkchecks import check
from support.onlineproject import configure, write_issue
from support.websites import DRIP, Site


@pytest.mark.slow
def test_a_dribbling_server_is_cut_at_the_request_timeout(http_site: Site) -> None:
    url = http_site.url("/dribble?one")
    results, _ = check([url], timeout=1)
    # Cut by the deadline: the server hanging up after DRIBBLE s would be another error.
    assert results[url].error == "timeout after 1 s"
    assert not results[url].out_of_time
    assert DRIP < 1  # every read gets a byte within the timeout: httpx alone never cuts it


@pytest.mark.slow
def test_the_run_deadline_names_the_links_it_cut(http_site: Site) -> None:
    urls = [http_site.url(f"/dribble?run{n}") for n in range(4)]  # one host: one at a time
    results, _ = check(urls, deadline=1.5, timeout=1)
    first, *rest = (results[url] for url in urls)
    assert first.error == "timeout after 1 s"
    late = (
        "out of time: the run's 60 s ([check] run_timeout) ran out before this link's check ended"
    )
    assert [(r.error, r.out_of_time) for r in rest] == [(late, True)] * 3
    lines = [str(f) for f in report.link_findings(results, {})]
    assert lines == [f"warning: {urls[0]}: timeout after 1 s [link-check]"] + [
        f"warning: {url}: {late} [link-check]" for url in urls[1:]
    ]
    summary = OnlineReport(links=results).summary()
    assert summary.startswith("online: 4 link(s): 0 answering, 1 failing, 3 out of time, ")


@pytest.mark.slow
def test_check_online_ends_at_run_timeout_and_says_what_was_left(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base)
    config = project / "newsletter.toml"
    config.write_text(config.read_text(encoding="utf-8") + "run_timeout = 3\n", encoding="utf-8")
    urls = [http_site.url(f"/dribble?cli{n}") for n in range(4)]
    write_issue(project, 15, {"慢": urls})
    result = CliRunner().invoke(cli, ["check", "--issue", "15", "--online"])
    assert result.exit_code == 0, result.output  # out of time is a warning: the links may be fine
    lines = result.stdout.splitlines()
    timed_out = [line for line in lines if "timeout after 2 s" in line]
    late = [line for line in lines if "out of time: the run's 3 s ([check] run_timeout)" in line]
    assert timed_out == [f"warning: 「慢」 in 「项目」: {urls[0]}: timeout after 2 s [link-check]"]
    assert [line.split(" in 「项目」: ")[1].split(": out of time")[0] for line in late] == urls[1:]
    assert all(line.startswith("warning: ") for line in late)
    # The run ended at its deadline: three links named out of time, none cut by the server.
    assert any(", 3 out of time, " in line for line in lines if line.startswith("online: "))
