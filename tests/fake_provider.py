"""A fake paid API on 127.0.0.1: OpenAI-compatible and Gemini-compatible, with a paid API's faults.

A real HTTP server (``tests/fake_http.py``'s: threads, one per connection) that answers

* ``POST /v1/chat/completions`` as an OpenAI-compatible server (the runner's httpx adapter), and
* ``POST /v1beta/models/<model>:generateContent`` as the Gemini API (the real google-genai client),

with replies that are a deterministic function of the request bytes: a planner request (it
declares tools) gets a tool call repeating one of the view's trace calls or a ``finish`` with the
view's draft certificate or an empty one; a critic request (a response schema) gets one of the
schema's verdicts. Two runs that send the same requests therefore get the same replies, so any
cell that differs from an undisturbed run's is the runner's doing.

Faults (:class:`Faults`, changeable while the server runs):

* ``latency_s``: every reply waits this long;
* ``rate_limit=(n, window_s)``: more than ``n`` requests in any ``window_s`` seconds get HTTP 429
  with ``Retry-After`` (whole seconds until the window has room);
* ``first_faults``: the FIRST sending of a request body (its retry is answered normally) fails
  with a fault picked from the body's hash: ``{"503": 0.05, "hang": 0.01, ...}`` -- kinds
  ``503``, ``500``, ``429`` (with ``Retry-After``), ``hang`` (nothing is sent until the client
  gives up), ``malformed`` (200 with
  a body that is not JSON), ``truncated`` (200 whose body stops half-way, Content-Length
  promising more, then the connection closes) and ``close`` (the connection closes with no
  response);
* ``storm``: after ``storm_after`` more requests, the next ``storm`` requests all get HTTP 503
  (a burst that outlasts one retry);
* ``twice``: this fraction of the bodies a first fault hit (picked from the body's hash) get
  HTTP 503 on their second sending too (the retry fails: under ``on_transport_failure = "halt"``
  the run halts; the third sending, on resume, is answered normally);
* ``at``: the n-th request the server receives (1-based, retries and resumes counted) fails with
  the given fault kind, whatever its body: ``{2: "malformed", 10: "malformed", 11: "503"}``.

``python -m tests.fake_provider [--latency S]`` serves until killed and prints its base URL.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from runner.canonical import canonical_bytes, loads_strict
from tests.fake_http import Action, Close, FakeHTTPServer, Reply, Seen, Stall, Truncated

_VIEW_RE = re.compile(r"<ect-view format=\"([^\"]+)\">\s*(.*?)\s*</ect-view>", re.S)
FAULT_KINDS = ("503", "500", "429", "hang", "malformed", "truncated", "close")


@dataclass
class Faults:
    latency_s: float = 0.0
    rate_limit: tuple[int, float] | None = None
    first_faults: dict[str, float] = field(default_factory=dict)
    storm: int = 0
    storm_after: int = 0
    at: dict[int, str] = field(default_factory=dict)
    twice: float = 0.0


def _unit(data: bytes, salt: bytes) -> float:
    return int.from_bytes(hashlib.sha256(salt + data).digest()[:8], "big") / 2.0**64


def _view(text: str) -> dict[str, Any]:
    matches = list(_VIEW_RE.finditer(text))
    if not matches:
        return {}
    try:
        obj = loads_strict(matches[-1].group(2))
    except Exception:
        return {}
    return obj if isinstance(obj, dict) else {}


def decide(body: bytes, tools: list[str], user_text: str,
           schema: dict[str, Any] | None) -> tuple[str, Any]:
    """The reply to a request, from its bytes: ``("call", (name, args))`` or ``("text", str)``."""
    u = _unit(body, b"reply")
    if tools:
        view = _view(user_text)
        trace = [c for c in view.get("trace", []) if isinstance(c, dict) and c.get("tool_id")]
        if trace and u < 0.5:
            call = trace[int(u * 1000) % len(trace)]
            if call["tool_id"] in tools:
                return "call", (call["tool_id"], dict(call.get("args") or {}))
        if "finish" in tools:
            draft = view.get("draft")
            cert = draft if isinstance(draft, dict) and u < 0.8 else {"claims": []}
            return "call", ("finish", {"certificate": cert})
        return "call", (tools[0], {})
    verdicts = ["accept"]
    if schema is not None:
        enum = schema.get("properties", {}).get("verdict", {}).get("enum")
        if isinstance(enum, list) and enum:
            verdicts = enum
    verdict = verdicts[int(u * 1000) % len(verdicts)]
    return "text", canonical_bytes({"verdict": verdict, "reason": "fake reply"}).decode()


def openai_reply(body: bytes) -> bytes:
    req = loads_strict(body)
    tools = [t["function"]["name"] for t in req.get("tools", [])]
    users = [m.get("content") or "" for m in req["messages"] if m.get("role") == "user"]
    fmt = req.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema") if isinstance(fmt, dict) else None
    what, value = decide(body, tools, users[-1] if users else "", schema)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if what == "call":
        name, args = value
        message["tool_calls"] = [{"id": "call_" + hashlib.sha256(body).hexdigest()[:8],
                                  "type": "function",
                                  "function": {"name": name,
                                               "arguments": canonical_bytes(args).decode()}}]
    else:
        message["content"] = value
    return canonical_bytes({
        "id": "chatcmpl-" + hashlib.sha256(body).hexdigest()[:12], "object": "chat.completion",
        "model": req.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": 20,
                  "total_tokens": len(body) // 4 + 20}})


def gemini_reply(body: bytes) -> bytes:
    req = loads_strict(body)
    tools = [d["name"] for t in req.get("tools", []) for d in t.get("functionDeclarations", [])]
    texts = [p.get("text", "") for c in req.get("contents", []) if c.get("role") == "user"
             for p in c.get("parts", []) if isinstance(p, dict)]
    schema = req.get("generationConfig", {}).get("responseJsonSchema")
    what, value = decide(body, tools, texts[-1] if texts else "", schema)
    part = ({"functionCall": {"name": value[0], "args": value[1]}} if what == "call"
            else {"text": value})
    return canonical_bytes({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": len(body) // 4, "candidatesTokenCount": 20,
                          "totalTokenCount": len(body) // 4 + 20},
        "modelVersion": "fake-gemini", "responseId": hashlib.sha256(body).hexdigest()[:12]})


class FakeProvider(FakeHTTPServer):
    """The server (``tests/fake_http.py``'s); use as a context manager. ``url`` is the OpenAI base
    URL (``.../v1``), ``origin`` the Gemini base URL. ``stats`` counts replies by status and
    fault; ``seen`` holds every request received."""

    def __init__(self, faults: Faults | None = None, *, port: int = 0) -> None:
        self.faults = faults or Faults()
        self.stats: Counter[str] = Counter()
        self._sent: set[bytes] = set()
        self._faulted: Counter[bytes] = Counter()  # how often each body got a first fault
        self._times: deque[float] = deque()
        self._fault_lock = threading.Lock()
        super().__init__(self._handle, port=port)
        self.url = self.origin + "/v1"

    # -- one request --------------------------------------------------------------------

    def _admit(self, request: Seen) -> str | None:
        """The fault this request gets (None: a normal reply), decided under the lock."""
        f = self.faults
        body = request.body
        with self._fault_lock:
            scripted = f.at.get(request.n)
            if scripted is not None:
                self._sent.add(body)
                return scripted
            now = time.monotonic()
            if f.rate_limit is not None:
                n, window = f.rate_limit
                while self._times and self._times[0] <= now - window:
                    self._times.popleft()
                if len(self._times) >= n:
                    return "429"
                self._times.append(now)
            if f.storm > 0 and f.storm_after > 0:
                f.storm_after -= 1
            elif f.storm > 0:
                f.storm -= 1
                return "storm"
            first = body not in self._sent
            self._sent.add(body)
            again = self._faulted[body] == 1
            if again:
                self._faulted[body] += 1
        if again and f.twice and _unit(body, b"twice") < f.twice:
            return "503"
        if first and f.first_faults:
            u, edge = _unit(body, b"fault"), 0.0
            for kind in FAULT_KINDS:
                edge += f.first_faults.get(kind, 0.0)
                if u < edge:
                    with self._fault_lock:
                        self._faulted[body] = 1
                    return kind
        return None

    def _retry_after(self) -> int:
        f = self.faults
        if f.rate_limit is None:  # a scripted 429 (``at``)
            return 1
        with self._fault_lock:
            oldest = self._times[0] if self._times else time.monotonic()
        return max(1, int(oldest + f.rate_limit[1] - time.monotonic() + 0.999))

    def _handle(self, request: Seen) -> Action:
        fault = self._admit(request)
        self.stats[fault or "ok"] += 1
        if self.faults.latency_s:
            time.sleep(self.faults.latency_s)
        if fault == "hang":
            return Stall(600)
        if fault == "close":
            return Close()
        if fault in ("429", "503", "500", "storm"):
            status = {"429": 429, "500": 500}.get(fault, 503)
            headers = {"Retry-After": str(self._retry_after())} if fault == "429" else {}
            return Reply.json({"error": {"code": status, "message": "fake fault",
                                         "status": "UNAVAILABLE"}}, status, **headers)
        try:
            data = (gemini_reply(request.body) if ":generateContent" in request.path
                    else openai_reply(request.body))
        except Exception as e:  # a request the fake cannot read: a client error, loudly
            return Reply.json({"error": {"message": f"fake: {e}"}}, 400)
        if fault == "malformed":
            return Reply(200, b"<html>upstream proxy error</html>",
                         {"Content-Type": "application/json"})
        if fault == "truncated":
            return Truncated(data)
        return Reply(200, data, {"Content-Type": "application/json"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with FakeProvider(Faults(latency_s=args.latency), port=args.port) as server:
        print(server.url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
