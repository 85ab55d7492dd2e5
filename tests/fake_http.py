"""The one fake HTTP server of the tests: a real server on 127.0.0.1 whose answers are actions.

A threaded ``http.server`` (one thread per connection, HTTP/1.1) that records every POST it
receives (:class:`Seen`: method, path, lower-cased headers, body bytes, its 1-based arrival
number) and answers it with the action its ``respond`` callable returns for it:

* :class:`Reply`: a status, headers and a body (``Reply.json`` for a JSON body);
* :class:`Close`: the connection closes without a byte of response;
* :class:`Stall`: nothing is sent for ``seconds`` (or until the server closes), then the
  connection closes: a hang the client must time out of;
* :class:`StallAfterHead`: the status line, the headers (promising 1000 bytes) and the start of
  a body are sent, then nothing;
* :class:`Truncated`: a 200 whose body stops half-way (``Content-Length`` promising all of it),
  then the connection closes.

The behaviours are configurations of it: a script of actions played in order
(``tests/providers/fakeserver.py``), a paid API with its faults, rate limits and Retry-After
(``tests/fake_provider.py``), and a small OpenAI-compatible planner and critic
(``tests/study/fake_openai.py``).
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from runner.canonical import JsonValue, canonical_bytes

__all__ = ["Action", "Close", "FakeHTTPServer", "Reply", "Seen", "Stall", "StallAfterHead",
           "Truncated"]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, obj: JsonValue, status: int = 200, **headers: str) -> Reply:
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
class Truncated:
    """A 200 whose body stops half-way, ``Content-Length`` promising all of ``body``; then the
    connection closes."""

    body: bytes


Action = Reply | Close | Stall | StallAfterHead | Truncated


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    n: int = 0  # 1-based: the n-th request the server received


class FakeHTTPServer:
    """The server; use as a context manager. ``origin`` is ``http://127.0.0.1:<port>``; ``seen``
    every request received, in arrival order; ``stop`` is set when the server closes (a stalled
    reply ends then)."""

    def __init__(self, respond: Callable[[Seen], Action], *, port: int = 0) -> None:
        self.respond = respond
        self.seen: list[Seen] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer._lock:
                    request = Seen("POST", self.path,
                                   {k.lower(): v for k, v in self.headers.items()}, body,
                                   len(outer.seen) + 1)
                    outer.seen.append(request)
                outer._perform(self, outer.respond(request))

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256

        self.httpd = Server(("127.0.0.1", port), Handler)
        host, self.port = self.httpd.server_address[:2]
        assert isinstance(host, str)  # an AF_INET address: (host, port)
        self.origin = f"http://{host}:{self.port}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _perform(self, h: http.server.BaseHTTPRequestHandler, action: Action) -> None:
        if isinstance(action, Close):
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if isinstance(action, Stall):
            self.stop.wait(action.seconds)
            h.close_connection = True
            return
        if isinstance(action, StallAfterHead):
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "1000")
            h.end_headers()
            h.wfile.write(b'{"candidates": [')
            h.wfile.flush()
            self.stop.wait(action.seconds)
            h.close_connection = True
            return
        if isinstance(action, Truncated):
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(action.body)))
            h.end_headers()
            h.wfile.write(action.body[: len(action.body) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        h.send_response(action.status)
        for k, v in action.headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(action.body)))
        h.end_headers()
        h.wfile.write(action.body)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
