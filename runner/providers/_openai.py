"""OpenAI-compatible chat completions over httpx (vLLM, Ollama, llama.cpp server).

``POST {base_url}/chat/completions`` with ``tools``, ``tool_choice``, ``seed``, a JSON
``response_format`` when the request has a response schema, and the token ``usage`` read back.
The request body is RFC 8785 canonical JSON, so identical requests are identical bytes. The
assistant message dict of a response is kept as ``Message.native`` and replayed unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import httpx

from runner.canonical import canonical_bytes, loads_strict
from runner.errors import ExitCategory, FormatError
from runner.providers._adapter import HttpAdapter
from runner.providers._credential import Credential
from runner.providers._egress import EgressGuardTransport
from runner.providers._errors import EgressRefused, ProviderFailure
from runner.providers._http import CallLog, ObserverFailed, Outcome, RecordingTransport
from runner.providers._retry import (
    RetryPolicy,
    classify_httpx_error,
    kind_for_status,
    parse_retry_after,
)
from runner.providers._throttle import Throttle
from runner.providers._types import (
    FunctionCall,
    Message,
    Part,
    ProviderRequest,
    ProviderResponse,
    Usage,
)

if TYPE_CHECKING:
    from runner.providers._registry import AdapterSettings

__all__ = ["OpenAICompatProvider"]


def _json_text(obj: Any) -> str:
    return canonical_bytes(obj).decode("utf-8")


class OpenAICompatProvider(HttpAdapter):
    """The OpenAI-compatible adapter. ``base_url`` ends before ``/chat/completions`` (e.g. ``.../v1``)."""

    name = "openai"
    simulated = False

    def __init__(
        self,
        base_url: str,
        *,
        credential: Credential | None = None,
        model: str,
        timeout_s: float = 60.0,
        guard: EgressGuardTransport | None = None,
        retry_policy: RetryPolicy | None = None,
        throttle: Throttle | None = None,
        response_format: Literal["json_schema", "json_object"] = "json_schema",
    ) -> None:
        if credential is not None and not isinstance(credential, Credential):
            raise TypeError("credential must be a Credential (see load_credential)")
        if response_format not in ("json_schema", "json_object"):
            raise ValueError("response_format must be 'json_schema' or 'json_object'")
        self.model = model
        self.response_format = response_format
        super().__init__(base_url, credential=credential, timeout_s=timeout_s, guard=guard,
                         retry_policy=retry_policy, throttle=throttle, sdk=False)
        # One connection per attempt, closed when it ends (see the Gemini adapter).
        headers = {
            "accept-encoding": "identity",
            "connection": "close",
            "content-type": "application/json",
        }
        if credential is not None:
            headers["authorization"] = f"Bearer {credential.reveal()}"
        self._http = httpx.AsyncClient(
            transport=RecordingTransport(self.guard),
            trust_env=False,
            timeout=httpx.Timeout(self.timeout_s),
            follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),
            headers=headers,
        )

    @classmethod
    def from_settings(cls, settings: AdapterSettings) -> OpenAICompatProvider:
        assert settings.base_url is not None  # the table says openai needs one
        return cls(settings.base_url, credential=settings.credential, model=settings.model,
                   timeout_s=settings.timeout_s, retry_policy=settings.retry_policy,
                   throttle=settings.throttle)

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- request building -------------------------------------------------------------------

    @staticmethod
    def _messages(request: ProviderRequest) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if request.system:
            out.append({"role": "system", "content": request.system})
        for m in request.messages:
            if m.role == "model":
                if isinstance(m.native, dict):
                    out.append(m.native)  # replayed exactly
                    continue
                texts = [p.text for p in m.parts if p.text is not None]
                msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
                calls = [p.function_call for p in m.parts if p.function_call is not None]
                if calls:
                    msg["tool_calls"] = [
                        {
                            "id": c.id or f"call_{i}",
                            "type": "function",
                            "function": {"name": c.name, "arguments": _json_text(dict(c.args))},
                        }
                        for i, c in enumerate(calls)
                    ]
                out.append(msg)
                continue
            texts = []
            for p in m.parts:
                if p.function_response is not None:
                    fr = p.function_response
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": fr.id or fr.name,
                            "content": _json_text(dict(fr.response)),
                        }
                    )
                elif p.text is not None:
                    texts.append(p.text)
            if texts:
                out.append({"role": "user", "content": "".join(texts)})
        return out

    def build_body(self, request: ProviderRequest) -> bytes:
        g = request.generation
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(request),
            "temperature": g.temperature,
            "seed": g.seed,
            "max_tokens": g.max_output_tokens,
            "n": 1,
            "stream": False,
        }
        if g.top_p is not None:
            body["top_p"] = g.top_p
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
            body["tool_choice"] = "auto"
        if request.response_schema is not None:
            if self.response_format == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "response", "schema": dict(request.response_schema)},
                }
            else:
                body["response_format"] = {"type": "json_object"}
        return canonical_bytes(body)

    # -- the call ---------------------------------------------------------------------------

    async def _attempt(self, request: ProviderRequest, log: CallLog) -> Outcome:
        try:
            body = self.build_body(request)
        except FormatError as e:
            return None, self._failure("request_invalid", e)
        try:
            http_response = await self._http.post(self.base_url + "/chat/completions", content=body)
        except ObserverFailed:
            raise  # the observer's own error: re-raised unchanged by the scaffold
        except EgressRefused as e:
            return None, self._failure("egress_refused", e)
        except httpx.HTTPError as e:
            last = log.last
            kind = (
                last.kind
                if last is not None and last.kind
                else classify_httpx_error(e, response_started=False)
            )
            return None, self._failure(kind, e, detail=f"{type(e).__name__}: {e}"[:300])
        return self._parse(http_response, request)

    def _no_exception_class(self, status: int | None) -> str | None:
        return f"HTTP {status}"  # a failure status with no exception names the status

    def _parse(
        self, r: httpx.Response, request: ProviderRequest
    ) -> tuple[ProviderResponse | None, ProviderFailure | None]:
        status = r.status_code
        if not 200 <= status < 300:
            kind = kind_for_status(status)
            return None, self._failure(
                kind,
                None,
                detail=f"HTTP {status} {r.reason_phrase}".strip(),
                status=status,
                retry_after_s=parse_retry_after(r.headers.get("retry-after")),
            )
        try:
            obj = loads_strict(r.content)
            if not isinstance(obj, dict):
                raise FormatError("response body is not a JSON object")
            choices = obj.get("choices")
            if not isinstance(choices, list):
                raise FormatError("response has no choices list")
            usage = _openai_usage(obj.get("usage"))
            if not choices:
                return None, self._failure(
                    "empty_response", None, detail="no choices in the response", status=status
                )
            choice = choices[0]
            if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
                raise FormatError("choices[0].message is not an object")
            msg = choice["message"]
            content = msg.get("content")
            if content is not None and not isinstance(content, str):
                raise FormatError("message.content is not a string")
            parts: list[Part] = []
            calls: list[FunctionCall] = []
            if content:
                parts.append(Part.of_text(content))
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise FormatError("a tool call has no function name")
                raw_args = fn.get("arguments", "{}")
                try:
                    args = loads_strict(raw_args) if isinstance(raw_args, str) else raw_args
                except FormatError as e:
                    raise _ModelOutputError(f"tool call arguments are not JSON: {e}") from e
                if not isinstance(args, dict):
                    raise _ModelOutputError("tool call arguments are not a JSON object")
                call = FunctionCall(fn["name"], args, tc.get("id"))
                calls.append(call)
                parts.append(Part(function_call=call))
        except _ModelOutputError as e:
            # The API's reply is well-formed; the model's answer in it is not.
            return None, self._failure("malformed_output", e, detail=str(e)[:300], status=status)
        except FormatError as e:
            return None, self._failure("unparseable", e, detail=str(e)[:300], status=status)
        structured: Any = None
        if request.response_schema is not None and content:
            try:
                structured = loads_strict(content)
            except FormatError:
                structured = None
        model_version = obj.get("model") if isinstance(obj.get("model"), str) else None
        response_id = obj.get("id") if isinstance(obj.get("id"), str) else None
        finish = choice.get("finish_reason")
        response = ProviderResponse(
            text=content or None,
            structured=structured,
            function_calls=tuple(calls),
            finish_reason=finish if isinstance(finish, str) else None,
            usage=usage,
            model_version=model_version,
            response_id=response_id,
            provider=self.name,
            simulated=False,
            message=Message("model", tuple(parts), native=msg),
        )
        return response, None


class _ModelOutputError(FormatError):
    """The model's content inside a well-formed reply is malformed (a model-output failure)."""

    exit_category = ExitCategory.RUNTIME


def _openai_usage(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage()

    def _int(name: str) -> int:
        v = u.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

    prompt, completion = _int("prompt_tokens"), _int("completion_tokens")
    return Usage(prompt, completion, _int("total_tokens") or prompt + completion)
