"""A link's host in, a connection to an address the link check may reach out (or a refusal).

Links come from issue files and redirects from any site on the web: neither may make the editor's
machine probe its own network. So every address a host resolves to (through the run's Lookup)
must be public unless `[check] allow_private` allows it, and the connection goes to that very
address, so a name cannot resolve to one address for the check and another for the connect (DNS
rebinding). IPv6 forms that carry an IPv4 address (mapped, 6to4, Teredo, NAT64) are judged by it.

A URL is first made one a fetcher reads one way only (`web_address`): a host in fullwidth letters
is read as browsers read it (IDNA's mapping, NFKC included), and a numeric host written in any
form but four decimal numbers (0177.0.0.1, 127.000.000.001, 2130706433, 0x7f.1) is refused
unfetched: resolvers differ on what it means (octal to one, decimal or a name to another), so no
check of "its" address can be trusted.

`CheckedTransport` is the httpx transport that connects only this way; the rest of HTTP (TLS with
the link's host name for SNI and verification, pooling, HTTP/1.1) is httpcore's.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class RefusedError(Exception):
    """The link's host is (or resolves to) an address the link check must not reach."""


class UnfetchableError(Exception):
    """The URL is not one the link check fetches: not http(s), no host, a host no fetcher reads
    one way only. The text says why."""


# A label as an IPv4 parser reads a number: decimal, octal (leading 0) or hex (0x).
_NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)")


def web_address(url: str) -> str:
    """`url` as the link check fetches it (its host mapped as browsers map it), or
    UnfetchableError saying why it is not fetched at all."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise UnfetchableError(f"{url} is not a web address (http or https)")
    host = parts.hostname
    if not host:
        raise UnfetchableError(f"{url} names no host (write it as http://HOST/PATH)")
    if host.startswith("[") or ":" in host:
        return url  # an IPv6 literal: one written form only, judged by connect_tcp
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        raise UnfetchableError(f"{url} has no valid port (1 to 65535)") from None
    mapped = unicodedata.normalize("NFKC", host)
    if not mapped.isascii():
        try:  # the standard library's IDNA: nameprep maps what NFKC left, then punycode
            mapped = mapped.encode("idna").decode("ascii")
        except UnicodeError:
            raise UnfetchableError(f"{host} is not a valid domain name") from None
    mapped = mapped.lower()
    bare = mapped.rstrip(".")
    if _NUMBER.fullmatch(bare.rsplit(".", 1)[-1]) and not _canonical_ipv4(bare):
        try:
            meant = f"some resolvers read it as {socket.inet_ntoa(socket.inet_aton(bare))}"
        except OSError:
            meant = "no resolver reads it as one address"
        raise UnfetchableError(
            f"{host} is a numeric host not written as four decimal numbers ({meant}): the link "
            "check never fetches it"
        )
    if mapped == host:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    netloc[-1] = mapped + port
    return urlunsplit(parts._replace(netloc="@".join(netloc)))


def _canonical_ipv4(host: str) -> bool:
    try:
        return str(ipaddress.IPv4Address(host)) == host
    except ValueError:
        return False


def address_refusal(address: str, allowed: bool | Sequence[str]) -> str | None:
    """Why the link check must not connect to `address` ("a loopback address"), or None.

    `allowed`: `[check] allow_private`: True allows every address, a list of networks those."""
    ip = ipaddress.ip_address(address)
    judged = embedded_ipv4(ip) or ip
    if allowed is True or (judged.is_global and not judged.is_multicast):
        return None
    if allowed and any(judged in ipaddress.ip_network(network) for network in allowed):
        return None
    return describe_range(judged)


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it is one of the forms that carry one."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def describe_range(ip: IPAddress) -> str:
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified:
        return "the unspecified address (this machine)"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    return "a reserved address"


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own backend, behind a resolution and a check of every address."""

    def __init__(
        self, resolve: Callable[[str], Awaitable[list[str]]], allowed: bool | Sequence[str]
    ) -> None:
        self._resolve = resolve
        self._allowed = allowed
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        literal = is_address(host)
        addresses = [host] if literal else await self._resolve(host)
        if not addresses:
            raise httpcore.ConnectError(f"{host} does not resolve (no A/AAAA record)")
        for address in addresses:
            reason = address_refusal(address, self._allowed)
            if reason is not None:
                raise RefusedError(
                    f"{host} is {reason}" if literal else f"{host} resolves to {address}, {reason}"
                )
        failure: Exception | None = None
        for address in addresses:  # the checked ones, and no others
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise RefusedError("a link never connects to a local socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncBaseTransport):
    """httpx requests over a connection pool whose every connection is made by CheckedBackend;
    httpcore's errors come out as httpx's, so callers handle one family."""

    def __init__(self, backend: CheckedBackend, tls: ssl.SSLContext) -> None:
        self._pool = httpcore.AsyncConnectionPool(ssl_context=tls, network_backend=backend)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core)
        except httpcore.TimeoutException as exc:
            raise httpx.TimeoutException(str(exc) or "timed out", request=request) from exc
        except httpcore.ProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except (httpcore.NetworkError, httpcore.UnsupportedProtocol) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        assert not isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: object) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:  # type: ignore[attr-defined]
            yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()
