"""A tiny OpenAI-compatible chat-completions server on 127.0.0.1 (``tests/fake_http.py``'s).

Planner requests (they declare a ``finish`` tool) get one ``get_parent`` tool call on a view
with every decision left, then a ``finish`` with an empty certificate; critic requests (a
response schema) get an ``accept`` verdict. Every request's headers and body are kept.
"""

from __future__ import annotations

from typing import Any

from runner.canonical import canonical_bytes, loads_strict
from runner.policies import extract_view
from tests.fake_http import FakeHTTPServer, Reply, Seen

__all__ = ["FakeOpenAI", "Seen"]


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


class FakeOpenAI(FakeHTTPServer):
    def __init__(self) -> None:
        super().__init__(lambda request: Reply.json(_reply(loads_strict(request.body))))
        self.url = self.origin + "/v1"
