"""The provider table: every provider, what it needs and how to build it, in one place.

Each provider is one :class:`ProviderEntry` in :data:`PROVIDERS` (docs/architecture.md, "How to
add a provider"): its name, whether it is simulated, whether it takes, needs or refuses a
credential, whether it needs a base URL, its default model, the variable the help suggests for
its key, and where its adapter class lives. Everything that used to decide by provider name
reads the table instead: :func:`check_provider_settings` (the one validation of a provider's
settings; it needs no credential and no network, so commands and the preflight call it before
creating anything), :func:`build`, the preflight's credential check, the static study's
defaults and the CLI's ``--provider`` choices.

This module imports nothing heavy (no httpx, no google-genai): the CLI reads the table to build
its ``--help``. An adapter module is imported only when its provider is built
(:meth:`ProviderEntry.load`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from runner.errors import ExitCategory, ProviderError
from runner.providers._credential import Credential, load_credential
from runner.providers._errors import EgressRefused
from runner.providers._types import Provider

if TYPE_CHECKING:  # httpx and anyio load only when a provider is built
    from runner.providers._retry import RetryPolicy
    from runner.providers._simulated import Responder
    from runner.providers._throttle import Throttle

__all__ = [
    "PROVIDERS",
    "PROVIDER_NAMES",
    "AdapterSettings",
    "CredentialUse",
    "ProviderConfigError",
    "ProviderEntry",
    "build",
    "check_provider_settings",
    "is_simulated",
    "provider_entry",
]


class ProviderConfigError(ProviderError):
    """A provider was asked for with settings it cannot use (a usage mistake, named in one line:
    an unknown name, a credential or ``--base-url`` for the simulated provider, a missing one
    for a live provider)."""

    exit_category = ExitCategory.USAGE


class CredentialUse(Enum):
    """Whether a provider refuses, accepts or needs an API key."""

    REFUSED = "refused"  # the simulated provider: passing one is a usage mistake
    OPTIONAL = "optional"  # e.g. a local OpenAI-compatible server
    REQUIRED = "required"


@dataclass(frozen=True)
class AdapterSettings:
    """What :func:`build` hands an adapter class's ``from_settings`` (already validated; the
    model already defaulted; the credential already loaded when one was given)."""

    model: str
    base_url: str | None = None
    credential: Credential | None = None
    timeout_s: float = 60.0
    retry_policy: RetryPolicy | None = None
    throttle: Throttle | None = None
    responder: Responder | None = None  # the simulated provider's only


class AdapterClass(Protocol):
    """An adapter class as the table loads it: it builds itself from validated settings."""

    def from_settings(self, settings: AdapterSettings) -> Provider: ...


@dataclass(frozen=True)
class ProviderEntry:
    """One row of the provider table.

    ``adapter`` is ``"module:Class"``; the module is imported by :meth:`load` only. ``label``
    names the provider in the preflight's credential line. ``model_prefix`` (the simulated
    provider's ``simulated-``) is a prefix every model name must have. ``credential_env`` is
    the variable the help suggests for ``--credential-env``: nothing ever reads it implicitly.
    """

    name: str
    label: str
    adapter: str
    simulated: bool = False
    credential: CredentialUse = CredentialUse.OPTIONAL
    needs_base_url: bool = False
    default_model: str | None = None
    model_prefix: str | None = None
    credential_env: str | None = None

    def load(self) -> AdapterClass:
        """The adapter class (its module imported now, the first time it is used)."""
        module, _, cls = self.adapter.partition(":")
        loaded: AdapterClass = getattr(importlib.import_module(module), cls)
        return loaded


_TABLE: dict[str, ProviderEntry] = {
    e.name: e
    for e in (
        ProviderEntry(
            name="simulated", label="simulated provider",
            adapter="runner.providers._simulated:SimulatedProvider", simulated=True,
            credential=CredentialUse.REFUSED, default_model="simulated-1",
            model_prefix="simulated-"),
        ProviderEntry(
            name="gemini", label="Gemini API",
            adapter="runner.providers._gemini:GeminiProvider",  # google-genai: slow to import
            credential=CredentialUse.REQUIRED, default_model="gemini-2.5-flash",
            credential_env="GEMINI_API_KEY"),
        ProviderEntry(
            name="openai", label="openai-compatible endpoint",
            adapter="runner.providers._openai:OpenAICompatProvider", needs_base_url=True,
            credential_env="OPENAI_API_KEY"),
    )
}

PROVIDERS: Mapping[str, ProviderEntry] = MappingProxyType(_TABLE)
"""Every provider a command accepts, by name, in the order help texts list them (a read-only
view of the table: it always shows the table as it is now)."""

PROVIDER_NAMES: tuple[str, ...] = tuple(_TABLE)
"""The names of the providers this package ships, in table order."""


def provider_entry(name: str) -> ProviderEntry:
    """The table's entry for ``name``.

    Raises:
        ProviderConfigError: no provider has that name (the message lists the names).
    """
    entry = _TABLE.get(name)
    if entry is None:
        raise ProviderConfigError(f"unknown provider {name!r} ({', '.join(_TABLE)})")
    return entry


def is_simulated(name: str) -> bool:
    """Whether the table marks ``name`` simulated (an unknown name is not: it is refused where
    the settings are checked)."""
    entry = _TABLE.get(name)
    return entry is not None and entry.simulated


def check_provider_settings(
    name: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    credential_given: bool = False,
) -> ProviderEntry:
    """Refuse settings ``name`` cannot use, before anything is loaded or created; return its
    table entry.

    Raises:
        ProviderConfigError: the settings do not fit the provider (the message says which).
    """
    entry = provider_entry(name)
    if entry.credential is CredentialUse.REFUSED and credential_given:
        raise ProviderConfigError(f"the {entry.label} takes no credential; do not pass one")
    if entry.simulated and base_url:
        raise ProviderConfigError(f"the {entry.label} takes no --base-url")
    if model is not None and entry.model_prefix and not model.startswith(entry.model_prefix):
        why = " (the simulated provider does not stand in for a real model)" if entry.simulated \
            else ""
        raise ProviderConfigError(
            f"a {name} model name must start with {entry.model_prefix!r}, got {model!r}{why}")
    if entry.simulated:
        return entry
    if entry.credential is CredentialUse.REQUIRED and not credential_given:
        raise ProviderConfigError(f"{name} needs --credential-file PATH or --credential-env NAME")
    if entry.needs_base_url and not base_url:
        raise ProviderConfigError(
            f"--provider {name} needs --base-url (e.g. http://127.0.0.1:8000/v1)")
    if base_url:
        from runner.providers._egress import Origin  # httpx: only with a base URL to check

        try:
            origin = Origin.parse(base_url.rstrip("/"))
            if credential_given:
                origin.check_credential_transport()
        except EgressRefused as e:
            raise ProviderConfigError(f"--base-url: {e}") from e
    return entry


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
    ``credential_env``. ``responder`` is the simulated provider's; ``model`` defaults to the
    table's default model (a provider without one needs it). ``throttle`` paces every attempt of
    a live provider (the simulated one sends nothing and ignores it).

    Raises:
        ProviderConfigError: settings the provider cannot use.
        CredentialError: the credential cannot be loaded.
    """
    given = credential is not None or bool(credential_file or credential_env)
    entry = check_provider_settings(name, model=model, base_url=base_url, credential_given=given)
    if credential is None and given:
        credential = load_credential(file=credential_file, env=credential_env)
    model = model or entry.default_model
    if not model:
        raise ProviderConfigError(f"{name} needs --model")
    return entry.load().from_settings(AdapterSettings(
        model=model, base_url=base_url, credential=credential, timeout_s=timeout_s,
        retry_policy=retry_policy, throttle=throttle, responder=responder))
