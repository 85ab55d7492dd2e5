"""Adding a provider is one adapter plus one table entry: a throwaway provider registered here (in
the test only) is built by the registry, checked by the preflight and offered by the CLI, and
the shipped adapters agree with their entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import cli
from runner.providers import (
    PROVIDER_NAMES,
    PROVIDERS,
    AdapterSettings,
    AttemptObserver,
    CredentialUse,
    Message,
    Part,
    ProviderAdapter,
    ProviderConfigError,
    ProviderEntry,
    ProviderRequest,
    ProviderResponse,
    RetryPolicy,
    Usage,
    _registry,
    build,
    check_provider_settings,
    is_simulated,
    provider_entry,
)
from runner.providers._http import CallLog, Outcome
from runner.study import ProviderChoice
from tests.study.support import make_study, preflight


class EchoProvider(ProviderAdapter):
    """The whole adapter of a new provider: it answers every request with its last text."""

    name = "echo"

    def __init__(self, model: str) -> None:
        self.model = model

    @classmethod
    def from_settings(cls, settings: AdapterSettings) -> EchoProvider:
        return cls(settings.model)

    def _call_log(self, request: ProviderRequest, observer: AttemptObserver | None) -> CallLog:
        return CallLog(provider=self.name, model=self.model, cell_id=request.cell_id,
                       observer=observer, policy=RetryPolicy(max_retries=0))

    async def _attempt(self, request: ProviderRequest, log: CallLog) -> Outcome:
        slot = await log.begin(request.canonical(), retry=False)
        text = "".join(p.text or "" for p in request.messages[-1].parts)
        slot.status, slot.response_bytes = 200, text.encode()
        log.mark_end(slot)
        return ProviderResponse(text=text, structured=None, function_calls=(),
                                finish_reason="STOP", usage=Usage(1, 1, 2), model_version=self.model,
                                response_id="echo-1", provider=self.name, simulated=False,
                                message=Message("model", (Part.of_text(text),))), None


ECHO = ProviderEntry(name="echo", label="echo endpoint",
                     adapter=f"{__name__}:EchoProvider", credential=CredentialUse.REQUIRED,
                     default_model="echo-1", credential_env="ECHO_API_KEY")


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> ProviderEntry:
    monkeypatch.setitem(_registry._TABLE, "echo", ECHO)
    return ECHO


def test_the_registry_builds_a_provider_from_its_entry(
        echo: ProviderEntry, monkeypatch: pytest.MonkeyPatch) -> None:
    assert PROVIDERS["echo"] is echo and provider_entry("echo") is echo
    with pytest.raises(ProviderConfigError,
                       match="echo needs --credential-file PATH or --credential-env NAME"):
        build("echo")
    monkeypatch.setenv("ECT_ECHO_KEY", "k-echo")
    provider = build("echo", credential_env="ECT_ECHO_KEY")
    assert isinstance(provider, EchoProvider) and provider.model == "echo-1"
    assert check_provider_settings("echo", credential_given=True) is echo
    assert not is_simulated("echo") and is_simulated("simulated") and not is_simulated("x")
    with pytest.raises(ProviderConfigError, match=r"unknown provider 'x' \(.*, echo\)"):
        check_provider_settings("x")


def test_the_preflight_checks_a_provider_from_its_entry(echo: ProviderEntry,
                                                        tmp_path: Path) -> None:
    study = make_study(tmp_path / "study")
    report = preflight(study, tmp_path / "s.db", ProviderChoice("echo"))
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert failed["credential"] == "echo needs --credential-file PATH or --credential-env NAME"
    assert not ProviderChoice("echo").simulated and ProviderChoice("simulated").simulated


def test_the_cli_offers_a_provider_from_its_entry(echo: ProviderEntry,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for command in (["run"], ["resume"], ["preflight"], ["static"], ["provider", "smoke"]):
        text = CliRunner().invoke(cli, [*command, "--help"]).output
        assert "[simulated|gemini|openai|echo]" in text, command
    refused = CliRunner().invoke(cli, ["provider", "smoke", "--provider", "echo"])
    assert refused.exit_code == 2 and "echo needs --credential-file" in refused.output
    monkeypatch.setenv("ECT_ECHO_KEY", "k-echo")
    out = CliRunner().invoke(cli, ["provider", "smoke", "--provider", "echo",
                                   "--credential-env", "ECT_ECHO_KEY", "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["provider"] == "echo" and got["response"]["text"].startswith("Task: report")


def test_without_the_entry_nothing_knows_the_provider() -> None:
    assert "echo" not in PROVIDERS and PROVIDER_NAMES == ("simulated", "gemini", "openai")
    out = CliRunner().invoke(cli, ["provider", "smoke", "--provider", "echo"])
    assert out.exit_code == 2 and "'echo' is not one of" in out.output


@pytest.mark.parametrize("name", PROVIDER_NAMES)
def test_each_shipped_adapter_is_what_its_entry_says(name: str) -> None:
    entry = PROVIDERS[name]
    adapter = entry.load()
    assert isinstance(adapter, type) and issubclass(adapter, ProviderAdapter)
    assert (adapter.name, adapter.simulated) == (entry.name, entry.simulated)
    assert (entry.credential is CredentialUse.REFUSED) == entry.simulated
