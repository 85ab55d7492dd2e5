"""runner.providers.build: the one place a provider is chosen by name, validated and built."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.providers import (
    PROVIDER_NAMES,
    OpenAICompatProvider,
    ProviderConfigError,
    SimulatedProvider,
    build,
    check_provider_settings,
)
from runner.study import StaticSpec, static_provider


@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("mock", {}, "unknown provider 'mock' (simulated, gemini, openai)"),
        ("simulated", {"base_url": "http://127.0.0.1:9"}, "takes no --base-url"),
        ("simulated", {"credential_env": "HOME"}, "takes no credential"),
        ("simulated", {"model": "gemini-2.5-flash"}, "must start with 'simulated-'"),
        ("gemini", {}, "gemini needs --credential-file PATH or --credential-env NAME"),
        ("openai", {"model": "m"}, "--provider openai needs --base-url"),
        ("openai", {"base_url": "notaurl", "model": "m"}, "--base-url: "),
        ("openai", {"base_url": "http://127.0.0.1:9/v1"}, "openai needs --model"),
    ],
)
def test_one_validation(name: str, settings: dict[str, str], message: str) -> None:
    with pytest.raises(ProviderConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(name, **settings)  # type: ignore[arg-type]


def test_check_agrees_with_build_and_needs_nothing_loaded() -> None:
    check_provider_settings("simulated")
    check_provider_settings("openai", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderConfigError):
        check_provider_settings("simulated", base_url="http://127.0.0.1:9")


def test_builds_each_adapter() -> None:
    assert isinstance(build("simulated"), SimulatedProvider)
    assert build("simulated", model="simulated-2").model == "simulated-2"
    oa = build("openai", base_url="http://127.0.0.1:9/v1", model="m")
    assert isinstance(oa, OpenAICompatProvider) and oa.model == "m"
    assert PROVIDER_NAMES == ("simulated", "gemini", "openai")


def test_the_static_study_validates_like_the_others() -> None:
    """The static study's provider builder used to ignore --base-url for the simulated provider (and accept
    any model name for it); it now goes through the same validation as run and smoke."""
    spec = StaticSpec.load("schedules/static.toml")
    with pytest.raises(ProviderConfigError, match="takes no --base-url"):
        static_provider("simulated", spec, base_url="http://127.0.0.1:9")
    with pytest.raises(ProviderConfigError, match="must start with 'simulated-'"):
        static_provider("simulated", spec, model="gpt-4o")


def test_building_a_simulated_provider_does_not_import_the_gemini_sdk() -> None:
    code = ("import sys; from runner.providers import build; build('simulated'); "
            "print('google.genai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
