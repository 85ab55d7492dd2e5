"""Offline guarantees for the framework adapter tests.

Each framework runs for real with its own scripted test model. Nothing may reach the network:
tracing and telemetry are switched off through the frameworks' own settings, API keys are
removed, and any socket connection to a non-loopback address fails the test loudly.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

_OFF = {
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "INSPECT_LOG_LEVEL": "warning",
    "INSPECT_DISPLAY": "none",
    "INSPECT_TELEMETRY": "",
}
_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
         "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")  # fmt: skip


def _loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if host in ("localhost",):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return isinstance(address, str | bytes)  # AF_UNIX paths are local


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[list[Any]]:
    for key, value in _OFF.items():
        monkeypatch.setenv(key, value)
    for key in _KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "inspect-logs"))
    attempts: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            attempts.append(address)
            raise OSError(f"test is offline: connection to {address!r} refused")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            attempts.append(address)
            return 111
        return real_connect_ex(self, address)

    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost") and not _loopback((host,)):
            attempts.append(host)
            raise socket.gaierror(f"test is offline: no lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield attempts
    assert not attempts, f"the adapter test tried the network: {attempts}"
