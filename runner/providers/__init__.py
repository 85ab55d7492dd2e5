"""Model providers behind one async interface (docs/providers.md).

Adapters: :class:`GeminiProvider` (the real google-genai client, pinned down),
:class:`OpenAICompatProvider` (chat completions over httpx) and :class:`SimulatedProvider`
(deterministic, offline: the default). Each ``generate()`` returns a :class:`ProviderResult`
with the parsed response or a typed :class:`ProviderFailure`, one :class:`AttemptRecord` per
HTTP attempt and the raw bytes of each exchange; the scaffold of ``generate()`` is the one
base, :class:`ProviderAdapter`. Which providers exist, what each needs and where its adapter
lives is the table :data:`PROVIDERS`, read by :func:`build`, the preflight, the static study and
the CLI: adding a provider is one adapter module plus one table entry. See docs/providers.md.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

# Light modules (no httpx, no google-genai): imported with the package, so the CLI can read the
# provider table (PROVIDERS) for its --help without loading any adapter.
from runner.providers._cost import PriceTable
from runner.providers._credential import REDACTED, Credential, load_credential
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
from runner.providers._registry import (
    PROVIDER_NAMES,
    PROVIDERS,
    AdapterSettings,
    CredentialUse,
    ProviderConfigError,
    ProviderEntry,
    build,
    check_provider_settings,
    is_simulated,
    provider_entry,
)
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

if _TYPE_CHECKING:  # loaded on first use at run time (see _LAZY below)
    from runner.providers._adapter import HttpAdapter, ProviderAdapter
    from runner.providers._egress import EgressGuardTransport, Origin
    from runner.providers._gemini import (
        DEFAULT_GEMINI_BASE_URL,
        GENAI_EXCEPTION_KINDS,
        GeminiProvider,
    )
    from runner.providers._http import ReplayCache
    from runner.providers._openai import OpenAICompatProvider
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
    "PROVIDERS",
    "PROVIDER_NAMES",
    "PROXY_ENV_VARS",
    "REDACTED",
    "RETRYABLE_KINDS",
    "TRANSPORT_KINDS",
    "VOLATILE_ATTEMPT_FIELDS",
    "AdapterSettings",
    "AttemptObserver",
    "AttemptRecord",
    "Credential",
    "CredentialError",
    "CredentialUse",
    "EgressGuardTransport",
    "EgressRefused",
    "FunctionCall",
    "FunctionResponse",
    "GeminiProvider",
    "GenerationConfig",
    "HttpAdapter",
    "Message",
    "OpenAICompatProvider",
    "Origin",
    "Part",
    "PriceTable",
    "Provider",
    "ProviderAdapter",
    "ProviderCallFailed",
    "ProviderConfigError",
    "ProviderEntry",
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
    "is_simulated",
    "load_credential",
    "parse_retry_after",
    "provider_entry",
    "scrub_environment",
    "simulated_rng",
]


# httpx (every adapter, the egress guard, the retry policy) and google-genai (~0.4 s to import)
# load only when a name that needs them is first used, so commands that never talk to a model
# (verify, --help) start quickly and the CLI can read the provider table.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("HttpAdapter", "ProviderAdapter"), "_adapter"),
    **dict.fromkeys(("EgressGuardTransport", "Origin"), "_egress"),
    **dict.fromkeys(("DEFAULT_GEMINI_BASE_URL", "GENAI_EXCEPTION_KINDS", "GeminiProvider"),
                    "_gemini"),
    "ReplayCache": "_http",
    "OpenAICompatProvider": "_openai",
    **dict.fromkeys(("HTTPX_EXCEPTION_KINDS", "MAX_RETRY_AFTER_S", "PRE_RESPONSE_KINDS",
                     "RetryPolicy", "classify_httpx_error", "parse_retry_after"), "_retry"),
    **dict.fromkeys(("Responder", "SimulatedProvider", "SimulatedReply", "default_responder",
                     "example_from_schema", "simulated_rng"), "_simulated"),
    "Throttle": "_throttle",
}


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runner.providers' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"runner.providers.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
