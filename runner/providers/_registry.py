"""The one place a provider is chosen by name, validated and built (run, static, smoke, preflight).

:func:`check_provider_settings` is the one validation of a provider's settings (it needs no
credential and no network, so commands and the preflight call it before creating anything);
:func:`build` applies it and constructs the adapter. The Gemini adapter (google-genai, slow to
import) is imported only when it is built.
"""

from __future__ import annotations

from runner.errors import ExitCategory, ProviderError
from runner.providers._credential import Credential, load_credential
from runner.providers._egress import Origin
from runner.providers._errors import EgressRefused
from runner.providers._retry import RetryPolicy
from runner.providers._simulated import Responder, SimulatedProvider
from runner.providers._throttle import Throttle
from runner.providers._types import Provider

__all__ = ["PROVIDER_NAMES", "ProviderConfigError", "build", "check_provider_settings"]

PROVIDER_NAMES: tuple[str, ...] = ("simulated", "gemini", "openai")
"""Every provider a command accepts, in the order help texts list them."""


class ProviderConfigError(ProviderError):
    """A provider was asked for with settings it cannot use (a usage mistake, named in one line:
    an unknown name, a credential or ``--base-url`` for the simulated provider, a missing one
    for a live provider)."""

    exit_category = ExitCategory.USAGE


def check_provider_settings(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    credential_given: bool = False,
) -> None:
    """Refuse settings ``name`` cannot use, before anything is loaded or created.

    Raises:
        ProviderConfigError: the settings do not fit the provider (the message says which).
    """
    if name not in PROVIDER_NAMES:
        raise ProviderConfigError(f"unknown provider {name!r} ({', '.join(PROVIDER_NAMES)})")
    if name == "simulated":
        if credential_given:
            raise ProviderConfigError("the simulated provider takes no credential; do not pass one")
        if base_url:
            raise ProviderConfigError("the simulated provider takes no --base-url")
        if model is not None and not model.startswith("simulated-"):
            raise ProviderConfigError(
                f"a simulated model name must start with 'simulated-', got {model!r} (the "
                "simulated provider does not stand in for a real model)")
        return
    if name == "gemini" and not credential_given:
        raise ProviderConfigError("gemini needs --credential-file PATH or --credential-env NAME")
    if name == "openai" and not base_url:
        raise ProviderConfigError(
            "--provider openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    if base_url:
        try:
            origin = Origin.parse(base_url.rstrip("/"))
            if credential_given or name == "gemini":
                origin.check_credential_transport()
        except EgressRefused as e:
            raise ProviderConfigError(f"--base-url: {e}") from e


def build(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    credential: Credential | None = None,
    credential_file: str | None = None,
    credential_env: str | None = None,
    timeout_s: float = 60.0,
    retry_policy: RetryPolicy | None = None,
    responder: Responder | None = None,
    throttle: Throttle | None = None,
) -> Provider:
    """The provider ``name`` with these settings (validated by :func:`check_provider_settings`).

    ``credential`` is one already loaded (a variable is removed from the environment when read,
    so it cannot be read twice); otherwise it is loaded from ``credential_file`` or
    ``credential_env``. ``responder`` is the simulated provider's; ``model`` defaults to
    ``simulated-1`` and ``gemini-2.5-flash``, and is required for ``openai``. ``throttle`` paces
every attempt of a live provider (the simulated one sends nothing and ignores it).

    Raises:
        ProviderConfigError: settings the provider cannot use.
        CredentialError: the credential cannot be loaded.
    """
    given = credential is not None or bool(credential_file or credential_env)
    check_provider_settings(name, model=model, base_url=base_url, credential_given=given)
    if name == "simulated":
        return SimulatedProvider(responder, model=model or "simulated-1")
    if credential is None and given:
        credential = load_credential(file=credential_file, env=credential_env)
    if name == "gemini":
        from runner.providers._gemini import GeminiProvider  # google-genai loads only here

        assert credential is not None  # checked above
        return GeminiProvider(credential, model=model or "gemini-2.5-flash", base_url=base_url,
                              timeout_s=timeout_s, retry_policy=retry_policy,
                              throttle=throttle)
    from runner.providers._openai import OpenAICompatProvider

    if not model:
        raise ProviderConfigError("openai needs --model")
    assert base_url is not None  # checked above
    return OpenAICompatProvider(base_url, credential=credential, model=model, timeout_s=timeout_s,
                                retry_policy=retry_policy, throttle=throttle)
