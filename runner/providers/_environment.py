"""Remove the variables google-genai (and httpx) would read implicitly.

The list comes from ``grep -rn "os.environ\\|os.getenv" site-packages/google/genai`` (google-genai
3.6.1) plus the google-auth variables that matter for Vertex/ADC, and the proxy variables. It is
documented in docs/providers.md. Anything starting with ``GOOGLE_GENAI_`` is removed as well, so a
variable added to that family by a later SDK release is covered too.
"""

from __future__ import annotations

import os

__all__ = ["IMPLICIT_ENV_PREFIXES", "IMPLICIT_ENV_VARS", "PROXY_ENV_VARS", "scrub_environment"]

IMPLICIT_ENV_VARS: tuple[str, ...] = (
    # google/genai/_api_client.py
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_HTTP_CLIENT",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    # google/genai/_base_url.py
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    # google/genai/client.py
    "GOOGLE_GENAI_CLIENT_MODE",
    "GOOGLE_GENAI_REPLAYS_DIRECTORY",
    "GOOGLE_GENAI_REPLAY_ID",
    # google/genai/_gaos/utils/{security,logger}.py
    "GOOGLE_GENAI_ACCESS_TOKEN",
    "GOOGLE_GENAI_API_KEY",
    "GOOGLE_GENAI_DEFAULT_HEADERS",
    "GOOGLE_GENAI_DEBUG",
    # google-auth (ADC, mTLS), read on the Vertex path
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_QUOTA_PROJECT",
    "GCLOUD_PROJECT",
    "GOOGLE_API_USE_MTLS_ENDPOINT",
    "GOOGLE_API_USE_CLIENT_CERTIFICATE",
    "CLOUDSDK_CONTEXT_AWARE_USE_CLIENT_CERTIFICATE",
)
IMPLICIT_ENV_PREFIXES: tuple[str, ...] = ("GOOGLE_GENAI_",)
PROXY_ENV_VARS: tuple[str, ...] = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)


def scrub_environment(*, sdk: bool = True) -> tuple[str, ...]:
    """Delete the implicit variables from ``os.environ``; return the names removed (sorted).

    ``sdk=False`` removes only the proxy variables (the OpenAI-compatible adapter). The values are
    never returned or logged.
    """
    doomed = set(PROXY_ENV_VARS)
    if sdk:
        doomed.update(IMPLICIT_ENV_VARS)
        doomed.update(k for k in os.environ if k.startswith(IMPLICIT_ENV_PREFIXES))
    removed = sorted(k for k in doomed if k in os.environ)
    for k in removed:
        del os.environ[k]
    return tuple(removed)
