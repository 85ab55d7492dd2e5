"""Fixtures for the provider tests: a real local HTTP server, requests, an observer, a canary."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.providers import (
    AttemptRecord,
    Credential,
    GenerationConfig,
    Message,
    ProviderRequest,
    ToolDecl,
    load_credential,
)
from tests.providers.fakeserver import FakeServer

TOOL = ToolDecl(
    "get_metric",
    "Return one metric value.",
    {
        "type": "object",
        "properties": {"entity": {"type": "string"}, "date": {"type": "string"}},
        "required": ["entity", "date"],
    },
)
SCHEMA = {
    "type": "object",
    "properties": {"action": {"type": "string", "enum": ["call", "finish"]}},
    "required": ["action"],
}


def make_request(
    *,
    tools: bool = True,
    schema: bool = False,
    seed: int = 11,
    messages: tuple[Message, ...] | None = None,
) -> ProviderRequest:
    return ProviderRequest(
        role="planner",
        system="You are the planner.",
        messages=messages or (Message.user_text("Find the revenue of store-01."),),
        tools=(TOOL,) if tools else (),
        response_schema=SCHEMA if schema else None,
        generation=GenerationConfig(temperature=0.2, seed=seed, max_output_tokens=512),
        metadata={"cell_id": "cell-0007", "seed": seed},
    )


class Journal:
    """An AttemptObserver that records events and what the server had seen at each."""

    def __init__(self, server: FakeServer | None = None) -> None:
        self.server = server
        self.events: list[tuple[str, AttemptRecord, int]] = []

    async def begin(self, record: AttemptRecord) -> None:
        self.events.append(("begin", record, len(self.server.seen) if self.server else 0))

    async def end(self, record: AttemptRecord) -> None:
        self.events.append(("end", record, len(self.server.seen) if self.server else 0))


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
def canary() -> str:
    return "ECTCANARY" + secrets.token_hex(16)


@pytest.fixture
def credential_file(tmp_path: Path, canary: str) -> Path:
    path = tmp_path / "key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(canary + "\n")
    return path


@pytest.fixture
def credential(credential_file: Path) -> Credential:
    return load_credential(file=credential_file)


def gemini_ok(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {
                                "name": "get_metric",
                                "args": {"entity": "store-01", "date": "2024-03-01"},
                            }
                        }
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 40,
            "candidatesTokenCount": 9,
            "thoughtsTokenCount": 3,
            "totalTokenCount": 52,
        },
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "resp-1",
    }
    body.update(extra)
    return body


def openai_ok(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "local-model-q4",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_abc",
                            "type": "function",
                            "function": {
                                "name": "get_metric",
                                "arguments": '{"entity":"store-01","date":"2024-03-01"}',
                            },
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37},
    }
    body.update(extra)
    return body
