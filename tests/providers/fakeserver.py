"""A real HTTP server on 127.0.0.1 (random port) that plays a script of responses.

Used to drive the real google-genai client and the OpenAI-compatible adapter end to end. Each
request pops the next action (an HTTP 500 once the script is spent); every request (path,
headers, body bytes) is recorded. The server and its actions are ``tests/fake_http.py``'s.
"""

from __future__ import annotations

from collections import deque

from tests.fake_http import Action, Close, FakeHTTPServer, Reply, Seen, Stall, StallAfterHead

__all__ = ["Close", "FakeServer", "Reply", "Seen", "Stall", "StallAfterHead"]


class FakeServer(FakeHTTPServer):
    def __init__(self) -> None:
        self.script: deque[Action] = deque()
        super().__init__(self._next)
        self.url = self.origin

    def _next(self, request: Seen) -> Action:
        return self.script.popleft() if self.script else Reply(500, b"{}")

    def play(self, *actions: Action) -> None:
        self.script.extend(actions)
