"""Model providers behind one async interface (docs/providers.md).

Adapters: :class:`GeminiProvider` (the real google-genai client, pinned down),
:class:`OpenAICompatProvider` (chat completions over httpx) and :class:`SimulatedProvider`
(deterministic, offline: the default). Each ``generate()`` returns a :class:`ProviderResult`
with the parsed response or a typed :class:`ProviderFailure`, one :class:`AttemptRecord` per
HTTP attempt and the raw bytes of each exchange. See docs/providers.md.
"""

from typing import Any as _Any

from runner.providers._cost import PriceTable
from runner.providers._credential import REDACTED, Credential, load_credential
from runner.providers._egress import EgressGuardTransport, Origin
from runner.providers._environment import (
    IMPLICIT_ENV_PREFIXES,
    IMPLICIT_ENV_VARS,
    PROXY_ENV_VARS,
    scrub_environment,
)
from runner.providers._errors import (
    FAILURE_CLASSES,
    FAILURE_KINDS,
    MODEL_OUTPUT_KINDS,
    RETRYABLE_KINDS,
    TRANSPORT_KINDS,
    CredentialError,
    EgressRefused,
    ProviderCallFailed,
    ProviderFailure,
    failure_class,
)
from runner.providers._http import ReplayCache
from runner.providers._openai import OpenAICompatProvider
from runner.providers._registry import (
    PROVIDER_NAMES,
    ProviderConfigError,
    build,
    check_provider_settings,
)
from runner.providers._retry import (
    HTTPX_EXCEPTION_KINDS,
    MAX_RETRY_AFTER_S,
    PRE_RESPONSE_KINDS,
    RetryPolicy,
    classify_httpx_error,
    parse_retry_after,
)
from runner.providers._simulated import (
    Responder,
    SimulatedProvider,
    SimulatedReply,
    default_responder,
    example_from_schema,
    simulated_rng,
)
from runner.providers._throttle import Throttle
from runner.providers._types import (
    VOLATILE_ATTEMPT_FIELDS,
    AttemptObserver,
    AttemptRecord,
    FunctionCall,
    FunctionResponse,
    GenerationConfig,
    Message,
    Part,
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderResult,
    RawExchange,
    ToolDecl,
    Usage,
)

__all__ = [
    "DEFAULT_GEMINI_BASE_URL",
    "FAILURE_CLASSES",
    "FAILURE_KINDS",
    "GENAI_EXCEPTION_KINDS",
    "HTTPX_EXCEPTION_KINDS",
    "IMPLICIT_ENV_PREFIXES",
    "IMPLICIT_ENV_VARS",
    "MAX_RETRY_AFTER_S",
    "MODEL_OUTPUT_KINDS",
    "PRE_RESPONSE_KINDS",
    "PROVIDER_NAMES",
    "PROXY_ENV_VARS",
    "REDACTED",
    "RETRYABLE_KINDS",
    "TRANSPORT_KINDS",
    "VOLATILE_ATTEMPT_FIELDS",
    "AttemptObserver",
    "AttemptRecord",
    "Credential",
    "CredentialError",
    "EgressGuardTransport",
    "EgressRefused",
    "FunctionCall",
    "FunctionResponse",
    "GeminiProvider",
    "GenerationConfig",
    "Message",
    "OpenAICompatProvider",
    "Origin",
    "Part",
    "PriceTable",
    "Provider",
    "ProviderCallFailed",
    "ProviderConfigError",
    "ProviderFailure",
    "ProviderRequest",
    "ProviderResponse",
    "ProviderResult",
    "RawExchange",
    "ReplayCache",
    "Responder",
    "RetryPolicy",
    "SimulatedProvider",
    "SimulatedReply",
    "Throttle",
    "ToolDecl",
    "Usage",
    "build",
    "check_provider_settings",
    "classify_httpx_error",
    "default_responder",
    "example_from_schema",
    "failure_class",
    "load_credential",
    "parse_retry_after",
    "scrub_environment",
    "simulated_rng",
]


# google-genai takes ~0.4 s to import; load the Gemini adapter only when it is asked for, so
# commands that never talk to Gemini (verify, the simulated study) start quickly.
_LAZY = {"DEFAULT_GEMINI_BASE_URL", "GENAI_EXCEPTION_KINDS", "GeminiProvider"}


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        from runner.providers import _gemini

        return getattr(_gemini, name)
    raise AttributeError(f"module 'runner.providers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
