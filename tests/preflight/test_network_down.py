"""A resolver that fails every question (SERVFAIL or REFUSED: an offline laptop; NXDOMAIN for
every name, the root zone's too: a captive network) is one line, at once, with the exit code of
the offline checks, cache warm or cold; a resolver that fails only the sender's zone is that
zone's problem, said per check. Real DNS servers on 127.0.0.1 (dnszone.py) and a real web
server."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.dnszone import ZoneResolver, dns_server
from support.onlineproject import configure, write_issue
from support.websites import Site

HINT = "(offline? a captive network? [check] nameservers names the DNS servers to ask)"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def served(site: Site) -> int:
    return sum(site.requests.values())


def use_nameserver(project: Path, port: int) -> None:
    config = project / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace(text.split('nameservers = ["', 1)[1].split('"', 1)[0], f"127.0.0.1:{port}"),
        encoding="utf-8",
    )


def named_link(site: Site, host: str, path: str) -> str:
    return f"http://{host}:{site.base.rsplit(':', 1)[1]}{path}"


@pytest.mark.parametrize("rcode", ["SERVFAIL", "REFUSED", "NXDOMAIN"])
@pytest.mark.slow
def test_a_resolver_failing_everything_is_one_line(
    project: Path, http_site: Site, rcode: str
) -> None:
    with dns_server({}, failures={"": rcode}) as (port, resolver):
        configure(project, nameserver=f"127.0.0.1:{port}", base_url=http_site.base)
        write_issue(project, 15, {"甲": [named_link(http_site, "links.example", "/ok?down")]})
        offline_code, offline_out, _ = run("check", "--issue", "15")
        before = served(http_site)
        code, out, err = run("check", "--issue", "15", "--online")
    assert code == offline_code == 0
    extra = [line for line in out.splitlines() if line not in offline_out.splitlines()]
    assert extra == [
        f"online checks skipped: 127.0.0.1:{port} fails every question ({rcode} for "
        f"news.good.example, and for the root zone too) {HINT}"
    ]
    assert "Traceback" not in out + err
    assert served(http_site) == before  # nothing else was tried
    # The sender's TXT and the root's NS, each answered at once by the server: nothing was
    # asked again or waited for.
    assert len(resolver.queries) == 2


@pytest.mark.slow
def test_warm_cache_then_offline_is_still_one_line(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    """Checked at the office (the sender's records cached), then on the train with a link
    added: the one question left fails, so does the root, and the run stops there."""
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base)
    write_issue(project, 15, {"甲": [http_site.url("/ok?office")]})
    code, out, _ = run("check", "--issue", "15", "--online")
    assert "online: 1 link(s): 1 answering" in out
    added = named_link(http_site, "added.example", "/ok?train")
    write_issue(project, 15, {"甲": [http_site.url("/ok?office")], "乙": [added]})
    with dns_server({}, failures={"": "SERVFAIL"}) as (port, resolver):
        use_nameserver(project, port)
        code, out, err = run("check", "--issue", "15", "--online")
    online = [line for line in out.splitlines() if "online" in line or "[link-check]" in line]
    assert online == [
        f"online checks skipped: 127.0.0.1:{port} fails every question (SERVFAIL for "
        f"added.example, and for the root zone too) {HINT}"
    ]
    assert code == 0
    assert "Traceback" not in err
    assert {name for name, _ in resolver.queries} == {"added.example", ""}


@pytest.mark.slow
def test_one_broken_zone_is_that_zones_problem(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    """The sender's zone fails, everything else answers: the checks that need that zone say
    so, one each, and the links are checked."""
    with dns_server(dns[1].zone, failures={"good.example": "SERVFAIL"}) as (port, _):
        configure(project, nameserver=f"127.0.0.1:{port}", base_url=http_site.base)
        write_issue(project, 15, {"甲": [http_site.url("/ok?zone")]})
        code, out, _ = run("check", "--issue", "15", "--online")
    assert code == 0
    warnings = [line for line in out.splitlines() if "not checked" in line]
    failed = f"127.0.0.1:{port} gave no usable answer for"
    assert warnings == [
        f"warning: SPF not checked: {failed} news.good.example (SERVFAIL) [spf]",
        f"warning: DMARC not checked: {failed} _dmarc.news.good.example (SERVFAIL) [dmarc]",
        f"warning: MX not checked: {failed} news.good.example (SERVFAIL) [mx]",
    ]
    assert "online: 1 link(s): 1 answering, 0 failing" in out
    assert "skipped" not in out
