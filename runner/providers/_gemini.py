"""Gemini through the real google-genai client, pinned down (docs/providers.md).

Explicit API key only; ``vertexai=False``; ``api_version="v1beta"``; a timeout always set; SDK
retries off (``HttpRetryOptions(attempts=1)``: our :class:`RetryPolicy` decides); both a sync
``httpx.Client`` and an async ``httpx.AsyncClient`` injected (so the SDK never builds its own
client or picks aiohttp), each with ``trust_env=False`` and the egress guard; automatic function
calling and automatic continuation off; the model's ``Content`` replayed exactly on the next
turn (thought signatures included). The implicit environment variables are removed first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gt

from runner.canonical import loads_strict
from runner.errors import FormatError
from runner.providers._adapter import HttpAdapter
from runner.providers._credential import Credential
from runner.providers._egress import EgressGuardTransport
from runner.providers._errors import EgressRefused, ProviderFailure
from runner.providers._http import CallLog, ObserverFailed, Outcome, RecordingTransport
from runner.providers._retry import RetryPolicy, classify_httpx_error, kind_for_status
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

__all__ = ["DEFAULT_GEMINI_BASE_URL", "GENAI_EXCEPTION_KINDS", "GeminiProvider"]

DEFAULT_GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"

# Every exception class google.genai.errors defines -> failure kind (None: decided by the HTTP
# status the error carries). tests/providers fails when the SDK grows a class not listed here.
GENAI_EXCEPTION_KINDS: dict[type[BaseException], str | None] = {
    genai_errors.APIError: None,
    genai_errors.ClientError: None,
    genai_errors.ServerError: None,
    genai_errors.UnknownApiResponseError: "unparseable",
    genai_errors.UnknownFunctionCallArgumentError: "sdk_error",  # AFC only; AFC is off
    genai_errors.UnsupportedFunctionError: "sdk_error",  # AFC only
    genai_errors.FunctionInvocationError: "sdk_error",  # AFC only
    genai_errors.ContinuationInterruptedError: "sdk_error",  # interactions only
    genai_errors.ExperimentalWarning: "sdk_error",  # raised only when warnings are errors
}


class GeminiProvider(HttpAdapter):
    """The Gemini adapter. One instance may serve concurrent ``generate()`` calls."""

    name = "gemini"
    simulated = False

    def __init__(
        self,
        credential: Credential,
        *,
        model: str = "gemini-2.5-flash",
        base_url: str | None = None,
        timeout_s: float = 60.0,
        guard: EgressGuardTransport | None = None,
        retry_policy: RetryPolicy | None = None,
        throttle: Throttle | None = None,
    ) -> None:
        if not isinstance(credential, Credential):
            raise TypeError("GeminiProvider needs a Credential (see load_credential)")
        self.model = model
        # the key always travels, so the origin must keep it secret whatever the base URL
        super().__init__(base_url or DEFAULT_GEMINI_BASE_URL, credential=credential,
                         timeout_s=timeout_s, guard=guard, retry_policy=retry_policy,
                         throttle=throttle, sdk=True)
        # identity encoding: the recorded response bytes are the JSON body itself.
        common: dict[str, Any] = {
            "trust_env": False,
            "timeout": httpx.Timeout(self.timeout_s),
            "follow_redirects": False,
            # One connection per attempt, closed when it ends: a stale keep-alive socket must
            # not look like a transport failure, and a provider may outlive an event loop.
            "limits": httpx.Limits(max_keepalive_connections=0),
            "headers": {"accept-encoding": "identity", "connection": "close"},
        }
        self._sync_http = httpx.Client(transport=self.guard, **common)
        self._async_http = httpx.AsyncClient(transport=RecordingTransport(self.guard), **common)
        http_options = gt.HttpOptions(
            base_url=self.base_url + "/",
            api_version="v1beta",
            timeout=int(self.timeout_s * 1000),
            retry_options=gt.HttpRetryOptions(attempts=1),
            httpx_client=self._sync_http,
            httpx_async_client=self._async_http,
        )
        self._client = genai.Client(
            api_key=credential.reveal(), vertexai=False, http_options=http_options
        )

    @classmethod
    def from_settings(cls, settings: AdapterSettings) -> GeminiProvider:
        assert settings.credential is not None  # the table says gemini needs one
        return cls(settings.credential, model=settings.model, base_url=settings.base_url,
                   timeout_s=settings.timeout_s, retry_policy=settings.retry_policy,
                   throttle=settings.throttle)

    async def aclose(self) -> None:
        await self._async_http.aclose()
        self._sync_http.close()

    # -- request building -------------------------------------------------------------------

    def _config(self, request: ProviderRequest) -> gt.GenerateContentConfig:
        g = request.generation
        kwargs: dict[str, Any] = {
            "temperature": g.temperature,
            "seed": g.seed,
            "max_output_tokens": g.max_output_tokens,
            "candidate_count": 1,
            "automatic_function_calling": gt.AutomaticFunctionCallingConfig(disable=True),
            "automatic_continuation": False,
        }
        if g.top_p is not None:
            kwargs["top_p"] = g.top_p
        if request.system:
            kwargs["system_instruction"] = request.system
        if request.tools:
            kwargs["tools"] = [
                gt.Tool(
                    function_declarations=[
                        gt.FunctionDeclaration(
                            name=t.name,
                            description=t.description,
                            parameters_json_schema=dict(t.parameters),
                        )
                        for t in request.tools
                    ]
                )
            ]
            kwargs["tool_config"] = gt.ToolConfig(
                function_calling_config=gt.FunctionCallingConfig(
                    mode=gt.FunctionCallingConfigMode.AUTO
                )
            )
        if request.response_schema is not None:
            kwargs["response_mime_type"] = "application/json"
            kwargs["response_json_schema"] = dict(request.response_schema)
        return gt.GenerateContentConfig(**kwargs)

    @staticmethod
    def _content(message: Message) -> gt.Content:
        if isinstance(message.native, gt.Content):
            return message.native  # replayed exactly: thought signatures stay attached
        parts: list[gt.Part] = []
        for p in message.parts:
            if p.text is not None:
                parts.append(gt.Part(text=p.text))
            elif p.function_call is not None:
                fc = p.function_call
                parts.append(
                    gt.Part(
                        function_call=gt.FunctionCall(name=fc.name, args=dict(fc.args), id=fc.id)
                    )
                )
            elif p.function_response is not None:
                fr = p.function_response
                parts.append(
                    gt.Part(
                        function_response=gt.FunctionResponse(
                            name=fr.name, response=dict(fr.response), id=fr.id
                        )
                    )
                )
        return gt.Content(role=message.role, parts=parts)

    # -- the call ---------------------------------------------------------------------------

    async def _attempt(self, request: ProviderRequest, log: CallLog) -> Outcome:
        try:
            contents = [self._content(m) for m in request.messages]
            config = self._config(request)
        except (pydantic.ValidationError, ValueError, TypeError) as e:
            return None, self._failure("request_invalid", e)
        try:
            sdk_response = await self._client.aio.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        except ObserverFailed:
            raise  # the observer's own error: re-raised unchanged by the scaffold
        except Exception as e:  # every SDK/httpx error class is mapped below
            return None, self._map_exception(e, log)
        return self._parse(sdk_response, request, log)

    def _map_exception(self, exc: Exception, log: CallLog) -> ProviderFailure:
        last = log.last
        retry_after = last.retry_after_s if last is not None else None
        if isinstance(exc, EgressRefused):
            return self._failure("egress_refused", exc)
        if isinstance(exc, genai_errors.APIError):
            status = int(exc.code) if isinstance(exc.code, int) else None
            kind = kind_for_status(status) if status is not None else "http_status"
            detail = f"HTTP {status} {exc.status or ''}".strip()
            if isinstance(exc.message, str):
                detail += f": {exc.message.splitlines()[0][:200]}" if exc.message else ""
            return self._failure(kind, exc, detail=detail, status=status, retry_after_s=retry_after)
        if isinstance(exc, httpx.HTTPError):
            started = last is not None and last.status is not None
            kind = (
                last.kind
                if last is not None and last.kind
                else classify_httpx_error(exc, response_started=started)
            )
            return self._failure(kind, exc, detail=f"{type(exc).__name__}: {exc}"[:300])
        for cls in type(exc).__mro__:
            if cls in GENAI_EXCEPTION_KINDS:
                return self._failure(GENAI_EXCEPTION_KINDS[cls] or "sdk_error", exc)
        if isinstance(exc, json.JSONDecodeError | FormatError):
            return self._failure(
                "unparseable",
                exc,
                detail="response body is not valid JSON",
                status=last.status if last else None,
            )
        if isinstance(exc, pydantic.ValidationError):
            return self._failure(
                "unparseable",
                exc,
                detail="response body does not have the shape the API promises",
                status=last.status if last else None,
            )
        if isinstance(exc, ValueError | TypeError | KeyError | AttributeError):
            # The SDK raises these while converting a body that is JSON but not the promised shape.
            kind = (
                "unparseable" if last is not None and last.status is not None else "request_invalid"
            )
            return self._failure(kind, exc, detail=f"{type(exc).__name__}: {exc}"[:300])
        raise exc

    def _parse(
        self, r: gt.GenerateContentResponse, request: ProviderRequest, log: CallLog
    ) -> tuple[ProviderResponse | None, ProviderFailure | None]:
        last = log.last
        status = last.status if last is not None else None
        body = last.response_bytes if last is not None else None
        # The SDK tolerates some junk; we insist the body is strict JSON (dup keys, NaN, ...).
        try:
            if body is None:
                raise FormatError("no response body")
            obj = loads_strict(body)
            if not isinstance(obj, dict):
                raise FormatError("response body is not a JSON object")
        except FormatError as e:
            return None, self._failure("unparseable", e, detail=str(e)[:300], status=status)
        usage = _gemini_usage(r.usage_metadata)
        if not r.candidates or r.candidates[0].content is None:
            reason = None
            if r.prompt_feedback is not None and r.prompt_feedback.block_reason is not None:
                reason = str(r.prompt_feedback.block_reason.value)
            if r.candidates and r.candidates[0].finish_reason is not None:
                reason = str(r.candidates[0].finish_reason.value)
            if last is not None:
                last.usage = usage
            return None, self._failure(
                "empty_response",
                None,
                detail=f"no candidate content (reason: {reason})",
                status=status,
            )
        cand = r.candidates[0]
        content = cand.content
        assert content is not None
        parts: list[Part] = []
        calls: list[FunctionCall] = []
        texts: list[str] = []
        for p in content.parts or []:
            if p.function_call is not None:
                fc = FunctionCall(
                    p.function_call.name or "", dict(p.function_call.args or {}), p.function_call.id
                )
                calls.append(fc)
                parts.append(Part(function_call=fc))
            elif p.text is not None and not p.thought:
                texts.append(p.text)
                parts.append(Part.of_text(p.text))
        text = "".join(texts) if texts else None
        structured: Any = None
        if request.response_schema is not None and text is not None:
            try:
                structured = loads_strict(text)
            except FormatError:
                structured = None  # left to the caller's parser: the model broke the schema
        native = (
            content if content.role == "model" else content.model_copy(update={"role": "model"})
        )
        response = ProviderResponse(
            text=text,
            structured=structured,
            function_calls=tuple(calls),
            finish_reason=str(cand.finish_reason.value) if cand.finish_reason is not None else None,
            usage=usage,
            model_version=r.model_version,
            response_id=r.response_id,
            provider=self.name,
            simulated=False,
            message=Message("model", tuple(parts), native=native),
        )
        return response, None


def _gemini_usage(meta: gt.GenerateContentResponseUsageMetadata | None) -> Usage:
    if meta is None:
        return Usage()
    prompt = meta.prompt_token_count or 0
    # Thinking tokens are billed as output.
    output = (meta.candidates_token_count or 0) + (meta.thoughts_token_count or 0)
    total = meta.total_token_count or (prompt + output + (meta.tool_use_prompt_token_count or 0))
    return Usage(prompt, output, total)


def content_to_json(content: gt.Content) -> dict[str, Any]:
    """The wire (camelCase) JSON of a Content, thought signatures base64: for audit display."""
    out: dict[str, Any] = content.model_dump(mode="json", exclude_none=True, by_alias=True)
    return out
