"""A real HTTP server on 127.0.0.1 (random port) that plays a script of responses.

Used to drive the real google-genai client and the OpenAI-compatible adapter end to end. Each
request pops the next action; every request (path, headers, body bytes) is recorded.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from runner.canonical import canonical_bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, obj: Any, status: int = 200, **headers: str) -> Reply:
        return cls(status, canonical_bytes(obj), {"Content-Type": "application/json", **headers})


@dataclass
class Close:
    """Read the request, then close the connection without sending a byte."""


@dataclass
class Stall:
    """Send nothing for ``seconds`` (longer than the client timeout), then give up."""

    seconds: float = 5.0


@dataclass
class StallAfterHead:
    """Send the status line, headers and part of the body, then stall."""

    seconds: float = 5.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeServer:
    def __init__(self) -> None:
        self.script: deque[Any] = deque()
        self.seen: list[Seen] = []
        self.stop = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                outer.seen.append(
                    Seen(
                        "POST",
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
                action = outer.script.popleft() if outer.script else Reply(500, b"{}")
                if isinstance(action, Close):
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if isinstance(action, Stall):
                    outer.stop.wait(action.seconds)
                    self.close_connection = True
                    return
                if isinstance(action, StallAfterHead):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"candidates": [')
                    self.wfile.flush()
                    outer.stop.wait(action.seconds)
                    self.close_connection = True
                    return
                assert isinstance(action, Reply)
                self.send_response(action.status)
                for k, v in action.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(action.body)))
                self.end_headers()
                self.wfile.write(action.body)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def play(self, *actions: Any) -> None:
        self.script.extend(actions)
