"""A tiny OpenAI-compatible chat-completions server on 127.0.0.1 (a real HTTP server thread).

Planner requests (they declare a ``finish`` tool) get one ``get_parent`` tool call on a view
with every decision left, then a ``finish`` with an empty certificate; critic requests (a
response schema) get an ``accept`` verdict. Every request's headers and body are kept.
"""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass
from typing import Any

from runner.canonical import canonical_bytes, loads_strict
from runner.policies import extract_view


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


def _reply(request: dict[str, Any]) -> dict[str, Any]:
    tools = [t["function"]["name"] for t in request.get("tools", [])]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if "finish" in tools:
        user = [m["content"] for m in request["messages"] if m["role"] == "user"]
        _, view = extract_view(user[-1])
        args: dict[str, Any]
        if view["budget"]["decisions_left"] == 4:
            name, args = "get_parent", {"entity": "r01"}
        else:
            name, args = "finish", {"certificate": {"claims": []}}
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": name,
                                               "arguments": canonical_bytes(args).decode()}}]
    else:
        message["content"] = canonical_bytes({"verdict": "accept", "reason": "fine"}).decode()
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": request.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


class FakeOpenAI:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()},
                                       body))
                data = canonical_bytes(_reply(loads_strict(body)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
