"""URLs in, one LinkResult per URL out: each fetched (HEAD, else GET), redirects followed.

A few hosts at a time (`[check] concurrency`), one request at a time per host, so a site never
sees a burst from us. Every hop of a redirect chain is kept, so the report can name where a link
really goes. TLS is verified (the system's CAs plus `[check] ca_file`). Hosts are resolved through
the run's Lookup (`[check] nameservers`, else the system's resolver) and connected to only at
public addresses unless `[check] allow_private` says otherwise (connect.py), redirects included.
Each request has `[check] timeout` from connect to its last header line, however slowly a server
dribbles; the run's deadline cuts what is left, and those links are reported as out of time.
Results go into the preflight cache: a good one for `cache_ttl`, a failure for a minute at most,
so a fixed server is seen soon and the preview's live reload does not fetch again.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from newsletter.config.settings import CheckSettings
from newsletter.preflight.connect import (
    CheckedBackend,
    CheckedTransport,
    RefusedError,
    UnfetchableError,
    web_address,
)
from newsletter.preflight.lookup import Lookup, UnreachableError
from newsletter.state.statecache import Cache

MAX_REDIRECTS = 10
FAILURE_TTL = 60.0
USER_AGENT = "newsletter-linkcheck/1 (checking links of a newsletter issue before sending)"
_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True)
class LinkResult:
    url: str
    status: int | None = None  # the last answer's status; None when no answer came
    redirects: list[tuple[int, str]] = field(default_factory=list)  # (status, next URL) per hop
    error: str = ""  # why there was no usable answer: a timeout, TLS, a refused connection
    skipped: bool = False  # its host is in [check] link_skip
    out_of_time: bool = False  # the run's deadline passed before its check ended
    cached: bool = False

    @property
    def target(self) -> str:
        return self.redirects[-1][1] if self.redirects else self.url

    @property
    def ok(self) -> bool:
        return self.skipped or (not self.error and self.status is not None and self.status < 400)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["cached"], data["out_of_time"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LinkResult:
        hops = [(int(code), str(url)) for code, url in data.get("redirects", [])]
        return cls(
            url=str(data["url"]),
            status=data.get("status"),
            redirects=hops,
            error=str(data.get("error", "")),
            skipped=bool(data.get("skipped", False)),
            cached=True,
        )


class LinkChecker:
    def __init__(
        self,
        config: CheckSettings,
        cache: Cache,
        tls: Callable[[], ssl.SSLContext],
        lookup: Lookup,
    ) -> None:
        """`tls` makes the TLS context, called only when something is fetched: loading the
        system's CA store costs tens of milliseconds, more than a whole cached run."""
        self._config = config
        self._cache = cache
        self._tls = tls
        self._context: ssl.SSLContext | None = None
        self._lookup = lookup
        self.fetched = 0

    async def check(
        self, urls: Iterable[str], deadline: float | None = None
    ) -> dict[str, LinkResult]:
        """`deadline`: the event loop's time at which the run ends; the links not checked by
        then come back `out_of_time`."""
        results: dict[str, LinkResult] = {}
        by_host: dict[str, list[str]] = defaultdict(list)
        for url in dict.fromkeys(urls):
            host = _host_of(url)
            cached = self._cache.get(f"link:{url}")
            if self._skipped(host):
                results[url] = LinkResult(url, skipped=True)
            elif isinstance(cached, dict):
                results[url] = LinkResult.from_json(cached)
            else:
                by_host[host].append(url)
        if by_host:
            gate = asyncio.Semaphore(self._config.concurrency)
            backend = CheckedBackend(self._lookup.addresses, self._config.allow_private)
            try:
                async with (
                    _Client(
                        CheckedTransport(backend, self._tls_context()), self._config.timeout
                    ) as client,
                    asyncio.TaskGroup() as group,
                ):
                    # A TaskGroup, not gather: the network found down ends every host's queue.
                    batches = [
                        group.create_task(self._host(client, gate, queue, deadline))
                        for queue in by_host.values()
                    ]
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None  # NetworkDownError, or a bug
            for batch in batches:
                results.update(batch.result())
        return {url: results[url] for url in dict.fromkeys(urls)}

    async def answers(
        self, urls: Iterable[str], deadline: float | None = None
    ) -> dict[str, LinkResult]:
        """One HEAD of each URL, redirects not followed, nothing cached: what our own server
        answers (`newsletter serve`'s tracked links), `concurrency` at a time. A redirect's
        target is the result's `target`."""
        chosen = list(dict.fromkeys(urls))
        results: dict[str, LinkResult] = {}
        gate = asyncio.Semaphore(self._config.concurrency)
        backend = CheckedBackend(self._lookup.addresses, self._config.allow_private)

        async def one(client: _Client, url: str) -> None:
            async with gate:
                try:
                    status, location = await self._request(client, "HEAD", web_address(url))
                except (TimeoutError, httpx.TimeoutException):
                    error = f"timeout after {self._config.timeout:g} s"
                    results[url] = LinkResult(url, error=error)
                except RefusedError as exc:
                    results[url] = LinkResult(url, error=f"refused: {exc} ([check] allow_private)")
                except UnfetchableError as exc:
                    results[url] = LinkResult(url, error=f"refused: {exc}")
                except UnreachableError as exc:
                    results[url] = LinkResult(url, error=f"DNS: {exc}")
                except httpx.InvalidURL as exc:
                    results[url] = LinkResult(url, error=f"not a URL a fetcher reads: {exc}")
                except (httpx.HTTPError, OSError) as exc:
                    results[url] = LinkResult(url, error=describe_failure(exc))
                else:
                    hops = [(status, urljoin(url, location))] if location else []
                    results[url] = LinkResult(url, status, hops)

        try:
            async with (
                asyncio.timeout_at(deadline),
                _Client(
                    CheckedTransport(backend, self._tls_context()), self._config.timeout
                ) as client,
                asyncio.TaskGroup() as group,
            ):
                for url in chosen:
                    group.create_task(one(client, url))
        except TimeoutError:
            late = f"out of time: the run's {self._config.run_timeout:g} s ([check] run_timeout)"
            for url in chosen:
                results.setdefault(url, LinkResult(url, error=late, out_of_time=True))
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None  # NetworkDownError, or a bug
        return {url: results[url] for url in chosen}

    def _tls_context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = self._tls()
        return self._context

    def _skipped(self, host: str) -> bool:
        return any(host == skip or host.endswith("." + skip) for skip in self._config.link_skip)

    async def _host(
        self,
        client: _Client,
        gate: asyncio.Semaphore,
        urls: list[str],
        deadline: float | None,
    ) -> dict[str, LinkResult]:
        """One host's URLs, one after another, until the deadline."""
        results = {}
        for url in urls:
            try:
                async with asyncio.timeout_at(deadline), gate:
                    result = await self._follow(client, url)
            except TimeoutError:
                late = (
                    f"out of time: the run's {self._config.run_timeout:g} s "
                    "([check] run_timeout) ran out before this link's check ended"
                )
                results[url] = LinkResult(url, error=late, out_of_time=True)
                continue  # the next URLs are out of time at once: nothing waits any more
            ttl = self._config.cache_ttl if result.ok else min(FAILURE_TTL, self._config.cache_ttl)
            self._cache.put(f"link:{url}", result.to_json(), ttl)
            results[url] = result
        return results

    async def _follow(self, client: _Client, url: str) -> LinkResult:
        hops: list[tuple[int, str]] = []
        current = url
        seen = {url}
        try:
            for _ in range(MAX_REDIRECTS + 1):
                status, location = await self._fetch(client, web_address(current))
                if status not in _REDIRECTS or location is None:
                    return LinkResult(url, status, hops)
                current = urljoin(current, location)
                hops.append((status, current))
                if urlsplit(current).scheme.lower() not in ("http", "https"):
                    error = f"redirects to {current}, which is not a web address"
                    return LinkResult(url, status, hops, error=error)
                if current in seen:
                    return LinkResult(url, None, hops, error=f"a redirect loop (back to {current})")
                seen.add(current)
            return LinkResult(url, None, hops, error=f"more than {MAX_REDIRECTS} redirects")
        except (TimeoutError, httpx.TimeoutException):
            return LinkResult(url, None, hops, error=f"timeout after {self._config.timeout:g} s")
        except RefusedError as exc:
            return LinkResult(
                url,
                None,
                hops,
                error=f"refused: {exc}: the link check reaches public addresses only "
                "([check] allow_private)",
            )
        except UnfetchableError as exc:
            return LinkResult(url, None, hops, error=f"refused: {exc}")
        except UnreachableError as exc:
            return LinkResult(url, None, hops, error=f"DNS: {exc}")
        except httpx.InvalidURL as exc:  # a form web_address lets by that httpx still refuses
            return LinkResult(url, None, hops, error=f"not a URL a fetcher reads: {exc}")
        except (httpx.HTTPError, OSError) as exc:
            return LinkResult(url, None, hops, error=describe_failure(exc))

    async def _fetch(self, client: _Client, url: str) -> tuple[int, str | None]:
        """HEAD, and GET when HEAD is refused (many servers answer HEAD with 403/404/405)."""
        status, location = await self._request(client, "HEAD", url)
        if status >= 400:
            status, location = await self._request(client, "GET", url)
        return status, location

    async def _request(self, client: _Client, method: str, url: str) -> tuple[int, str | None]:
        """One request, resolving and connecting included, cut at `[check] timeout` as a whole:
        httpx's timeouts are per read, which a server sending a byte at a time never trips."""
        self.fetched += 1
        async with asyncio.timeout(self._config.timeout):
            return await client.ask(method, url)


class _Client(httpx.AsyncClient):
    """httpx's client for building requests (headers, timeouts), each sent straight to the
    checked transport: `send` would read a redirect's Location itself and raise on one no
    fetcher follows (`javascript:…`, `http://0177.0.0.1/`) before the check could name it."""

    def __init__(self, transport: CheckedTransport, timeout: float) -> None:
        super().__init__(
            transport=transport,
            timeout=timeout,
            headers={"User-Agent": USER_AGENT},
            trust_env=False,
        )
        self._checked = transport

    async def ask(self, method: str, url: str) -> tuple[int, str | None]:
        """The status and the Location header, as they came."""
        response = await self._checked.handle_async_request(self.build_request(method, url))
        await response.aclose()  # the body is not needed; closing keeps the connection short
        return response.status_code, response.headers.get("location")


def _host_of(url: str) -> str:
    """The host as it is fetched (fullwidth letters mapped), so `link_skip` matches it however
    it is written; a URL not fetched at all keeps its own, and _follow says why."""
    with contextlib.suppress(UnfetchableError):
        url = web_address(url)
    return (urlsplit(url).hostname or "").rstrip(".")


def describe_failure(exc: BaseException) -> str:
    """A transport error as one short phrase: TLS problems named as such."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"TLS: {seen.verify_message or seen.reason}"
        if isinstance(seen, ssl.SSLError):
            return f"TLS: {seen.reason or seen}"
        seen = seen.__cause__ or seen.__context__
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSL" in text:
        return f"TLS: {text}"
    return f"cannot connect: {text}"
