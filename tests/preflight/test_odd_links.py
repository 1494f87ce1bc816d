"""Links and redirects no fetcher can take as they are (a `javascript:` or host-less target,
numeric hosts written in octal or with zeros, fullwidth letters) are each a finding on their
link, never a traceback: `newsletter check --online` through the CLI against a web server and a
DNS server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.dnszone import ZoneResolver, dns_server
from support.linkchecks import check
from support.onlineproject import configure, write_issue
from support.websites import Site


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def port_of(site: Site) -> int:
    return int(site.base.rsplit(":", 1)[1])


def fetched_ok(site: Site) -> int:
    """Requests for /ok (the check's own one-click request goes to /unsubscribe)."""
    return site.requests[("HEAD", "/ok")] + site.requests[("GET", "/ok")]


def link_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.endswith("[link-check]")]


@pytest.mark.slow
def test_redirects_to_what_is_no_web_address_are_findings(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    script = http_site.url("/to?url=" + quote("javascript:alert(1)", safe=""))
    hostless = http_site.url("/to?url=" + quote("http:host/x", safe=""))
    numeric = http_site.url("/to?url=" + quote("http://0177.0.0.1/x", safe=""))
    fine = http_site.url("/ok?odd-redirects")
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base)
    write_issue(project, 15, {"脚": [script], "无": [hostless], "八": [numeric], "好": [fine]})
    code, out, err = run("check", "--issue", "15", "--online")
    assert "Traceback" not in out + err
    assert code == 1
    lines = link_lines(out)
    assert (
        f"error: 「脚」 in 「项目」: {script}: redirects to javascript:alert(1), which is not a "
        "web address (via 302, ending at javascript:alert(1)) [link-check]"
    ) in lines
    # "http:host/x" is a path on the same site, as browsers read it: fetched there.
    assert (
        f"error: 「无」 in 「项目」: {hostless}: 404 (via 302 → 404, ending at "
        f"{http_site.url('/host/x')}) [link-check]"
    ) in lines
    assert (
        f"error: 「八」 in 「项目」: {numeric}: refused: 0177.0.0.1 is a numeric host not "
        "written as four decimal numbers (some resolvers read it as 127.0.0.1): the link check "
        "never fetches it (via 302, ending at http://0177.0.0.1/x) [link-check]"
    ) in lines
    assert "online: 4 link(s): 1 answering, 3 failing" in out


@pytest.mark.slow
def test_numeric_hosts_in_odd_forms_are_refused_unfetched(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    port = port_of(http_site)
    octal = f"http://0177.0.0.1:{port}/ok?octal"
    zeros = f"http://127.000.000.001:{port}/ok?zeros"
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base)
    write_issue(project, 15, {"八": [octal], "零": [zeros]})
    before = fetched_ok(http_site)
    code, out, err = run("check", "--issue", "15", "--online")
    assert "Traceback" not in out + err
    assert code == 1
    assert link_lines(out) == [
        f"error: 「八」 in 「项目」: {octal}: refused: 0177.0.0.1 is a numeric host not written "
        "as four decimal numbers (some resolvers read it as 127.0.0.1): the link check never "
        "fetches it [link-check]",
        f"error: 「零」 in 「项目」: {zeros}: refused: 127.000.000.001 is a numeric host not "
        "written as four decimal numbers (some resolvers read it as 127.0.0.1): the link check "
        "never fetches it [link-check]",
    ]
    assert fetched_ok(http_site) == before  # neither reached the server


@pytest.mark.slow
def test_a_fullwidth_host_is_fetched_as_browsers_read_it(project: Path, http_site: Site) -> None:
    port = port_of(http_site)
    wide = f"http://ｌｉｎｋｓ．ｅｘａｍｐｌｅ:{port}/ok?fullwidth"
    with dns_server({("links.example", "A"): ["127.0.0.1"]}) as (dns_port, resolver):
        configure(project, nameserver=f"127.0.0.1:{dns_port}", base_url=http_site.base)
        write_issue(project, 15, {"宽": [wide]})
        _, out, err = run("check", "--issue", "15", "--online")
    assert "Traceback" not in out + err
    assert link_lines(out) == []
    assert ("links.example", "A") in resolver.queries
    assert "online: 1 link(s): 1 answering, 0 failing" in out


def test_link_skip_matches_a_fullwidth_host(http_site: Site) -> None:
    wide = f"http://ｌｉｎｋｓ．ｅｘａｍｐｌｅ:{port_of(http_site)}/ok?skipped"
    results, checker = check([wide], link_skip=["links.example"])
    assert results[wide].skipped
    assert checker.fetched == 0


def test_a_redirect_to_a_port_out_of_range_is_a_finding(http_site: Site) -> None:
    url = http_site.url("/to?url=" + quote("http://links.example:99999/x", safe=""))
    results, _ = check([url])
    assert (
        results[url].error == "refused: http://links.example:99999/x has no valid port (1 to 65535)"
    )
