"""`ect provider ...`: check a model provider end to end with one planner-shaped request."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from runner.cli._common import EXIT_RUNTIME, EXIT_USAGE, die, map_errors
from runner.cli._params import FiniteFloatRange, check_base_url

if TYPE_CHECKING:  # runner.providers pulls in httpx: imported when a command runs
    from runner.providers import ProviderRequest, ProviderResult

__all__ = ["COMMANDS", "smoke_request"]

SMOKE_SYSTEM = (
    "You are the planner of a tool-using agent. Call a tool to gather evidence before answering."
)
SMOKE_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entity": {"type": "string", "description": "entity id, e.g. 'store-01'"},
        "attribute": {"type": "string", "enum": ["revenue", "units"]},
        "date": {"type": "string", "format": "date"},
    },
    "required": ["entity", "attribute", "date"],
}


def smoke_request(seed: int = 20240601) -> ProviderRequest:
    """The one planner-shaped request `ect provider smoke` sends (a tool, temperature 0.2)."""
    from runner.providers import GenerationConfig, Message, ProviderRequest, ToolDecl

    tool = ToolDecl(name="get_metric",
                    description="Return the value of one metric for one entity on one date.",
                    parameters=SMOKE_TOOL_PARAMETERS)
    return ProviderRequest(
        role="planner",
        system=SMOKE_SYSTEM,
        messages=(
            Message.user_text(
                "Task: report the revenue of entity store-01 on 2024-03-01. "
                "Call get_metric with the right arguments."
            ),
        ),
        tools=(tool,),
        response_schema=None,
        generation=GenerationConfig(temperature=0.2, seed=seed, max_output_tokens=1024),
        metadata={"cell_id": "smoke", "seed": seed},
    )


@click.group("provider")
def provider_group() -> None:
    """Model providers: check one works before a study uses it."""


def _codes() -> dict[type[BaseException], int]:
    from runner.providers import CredentialError

    return {CredentialError: EXIT_USAGE}


@provider_group.command("smoke")
@click.option(
    "--provider",
    "provider_name",
    type=click.Choice(["gemini", "openai", "simulated"]),
    default="simulated",
    show_default=True,
    help="Which adapter to exercise.",
)
@click.option("--base-url", default=None, help="Provider origin (required for openai).")
@click.option("--model", default=None, help="Model name (default per provider).")
@click.option(
    "--credential-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="File holding the API key (mode 0600, owned by you).",
)
@click.option(
    "--credential-env",
    default=None,
    metavar="NAME",
    help="Name of the environment variable holding the API key.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=FiniteFloatRange(min=0, min_open=True, max=600),
    default=60.0,
    show_default=True,
    help="Seconds per attempt (at most 600).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@map_errors(_codes)
def smoke(
    provider_name: str,
    base_url: str | None,
    model: str | None,
    credential_file: str | None,
    credential_env: str | None,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Send one planner-shaped request and print the parsed response and the attempt records.

    Exit 0 when the provider answered; 5 with a one-line reason when it failed. The simulated
    provider needs no flags and no network.
    """
    import anyio

    provider = _build_provider(
        provider_name, base_url, model, credential_file, credential_env, timeout_s
    )
    if provider is None:
        return  # _build_provider already exited with a usage error

    async def _run() -> ProviderResult:
        try:
            result: ProviderResult = await provider.generate(smoke_request())
            return result
        finally:
            await provider.aclose()

    result = anyio.run(_run)
    _print(result, provider_name, as_json)
    if result.failure is not None:
        f = result.failure
        status = f" (HTTP {f.status})" if f.status is not None else ""
        die(f"provider call failed: {f.kind}{status}: {f.detail}", EXIT_RUNTIME)


def _build_provider(
    provider_name: str,
    base_url: str | None,
    model: str | None,
    credential_file: str | None,
    credential_env: str | None,
    timeout_s: float,
) -> Any:
    from runner.providers import OpenAICompatProvider, SimulatedProvider, load_credential

    has_credential = credential_file is not None or credential_env is not None
    if provider_name == "simulated":
        if has_credential or base_url:
            die("the simulated provider takes no credential and no --base-url", EXIT_USAGE)
            return None
        if model is not None and not model.startswith("simulated-"):
            die(f"a simulated model name must start with 'simulated-', got {model!r}", EXIT_USAGE)
            return None
        return SimulatedProvider(model=model or "simulated-1")
    check_base_url(provider_name, base_url, credential=has_credential)
    if provider_name == "gemini":
        if not has_credential:
            die("gemini needs --credential-file PATH or --credential-env NAME", EXIT_USAGE)
            return None
        credential = load_credential(file=credential_file, env=credential_env)
        from runner.providers import GeminiProvider  # google-genai loads only when used

        return GeminiProvider(
            credential, model=model or "gemini-2.5-flash", base_url=base_url, timeout_s=timeout_s
        )
    if not base_url:
        die("openai needs --base-url (e.g. http://127.0.0.1:8000/v1)", EXIT_USAGE)
        return None
    if not model:
        die("openai needs --model", EXIT_USAGE)
        return None
    optional = load_credential(file=credential_file, env=credential_env) if has_credential else None
    return OpenAICompatProvider(base_url, credential=optional, model=model, timeout_s=timeout_s)


def _print(result: ProviderResult, provider_name: str, as_json: bool) -> None:
    if as_json:
        obj = {"provider": provider_name, "ok": result.ok, **result.to_json()}
        click.echo(json.dumps(obj, indent=2, sort_keys=True))  # noqa: TID251 - display only
        return
    if result.response is not None:
        r = result.response
        label = " [SIMULATED]" if r.simulated else ""
        click.echo(f"provider: {r.provider}{label}  model: {r.model_version}")
        click.echo(f"finish: {r.finish_reason}  response id: {r.response_id}")
        if r.text is not None:
            click.echo(f"text: {r.text}")
        for c in r.function_calls:
            args = json.dumps(dict(c.args), sort_keys=True)  # noqa: TID251 - display only
            click.echo(f"function call: {c.name}({args})")
        u = r.usage
        click.echo(
            f"usage: input {u.input_tokens}, output {u.output_tokens}, total {u.total_tokens}"
        )
    for a in result.attempts:
        click.echo(
            f"attempt {a.attempt_no}: status={a.status} error={a.error_class} retry={a.retry} "
            f"latency_s={a.latency_s} request={a.request_sha256} response={a.response_sha256}"
        )


COMMANDS: list[click.Command] = [provider_group]
