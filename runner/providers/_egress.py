"""Egress guard: an httpx transport that only lets requests reach one origin.

This is a process-local guard on the HTTP clients the adapters build, not an OS sandbox: it stops
a mis-set base URL, a redirect or an SDK default from sending the credential elsewhere, but code
that opens its own sockets is not confined by it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import httpx

from runner.providers._errors import EgressRefused

__all__ = ["EgressGuardTransport", "Origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    """(scheme, host, port), compared exactly; the port is filled in from the scheme."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str | httpx.URL) -> Origin:
        try:
            u = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as e:
            raise EgressRefused(f"not a valid provider URL: {str(url)[:200]!r}") from e
        return cls.of_url(u)

    @classmethod
    def of_url(cls, u: httpx.URL) -> Origin:
        scheme = u.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise EgressRefused(f"scheme {scheme!r} is not allowed (only http and https)")
        if not u.host:
            raise EgressRefused(f"URL {str(u)[:200]!r} has no host")
        return cls(scheme, u.host.lower(), u.port or _DEFAULT_PORTS[scheme])

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def check_credential_transport(self) -> None:
        """Refuse to send a credential in clear text anywhere but this machine."""
        if self.scheme != "https" and not self.is_loopback:
            raise EgressRefused(
                f"refusing to send a credential over plain {self.scheme} to {self}; use https"
            )

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


class EgressGuardTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Forward a request only when its origin equals ``allowed_origin``; else EgressRefused.

    Usable by both ``httpx.Client`` and ``httpx.AsyncClient``; the inner transports default to
    httpx's own, with no connection retries (retries are :class:`RetryPolicy`'s business).
    """

    def __init__(
        self,
        allowed_origin: str | Origin,
        *,
        inner: httpx.BaseTransport | None = None,
        async_inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.allowed = (
            allowed_origin if isinstance(allowed_origin, Origin) else Origin.parse(allowed_origin)
        )
        self._inner = inner
        self._async_inner = async_inner

    def check(self, request: httpx.Request) -> None:
        try:
            origin = Origin.of_url(request.url)
        except EgressRefused as e:
            raise EgressRefused(f"egress refused: {e}") from None
        if origin != self.allowed:
            raise EgressRefused(
                f"egress refused: {origin} is not the configured provider origin {self.allowed}"
            )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.check(request)
        if self._inner is None:
            self._inner = httpx.HTTPTransport(retries=0)
        return self._inner.handle_request(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.check(request)
        if self._async_inner is None:
            self._async_inner = httpx.AsyncHTTPTransport(retries=0)
        return await self._async_inner.handle_async_request(request)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()

    async def aclose(self) -> None:
        if self._async_inner is not None:
            await self._async_inner.aclose()
