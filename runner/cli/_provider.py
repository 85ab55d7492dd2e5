"""`ect provider ...`: check a model provider end to end with one planner-shaped request."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from runner.cli._common import EXIT_RUNTIME, die, map_errors
from runner.cli._params import FiniteFloatRange, provider_options

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


@provider_group.command("smoke")
@provider_options(model_help="Model name (default: the provider's).")
@click.option(
    "--timeout",
    "timeout_s",
    type=FiniteFloatRange(min=0, min_open=True, max=600),
    default=60.0,
    show_default=True,
    help="Seconds per attempt (at most 600).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@map_errors()
def smoke(
    provider_name: str,
    model: str | None,
    base_url: str | None,
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

    from runner.providers import build

    provider = build(provider_name, model=model, base_url=base_url,
                     credential_file=credential_file, credential_env=credential_env,
                     timeout_s=timeout_s)

    async def _run() -> ProviderResult:
        try:
            result: ProviderResult = await provider.generate(smoke_request())
            return result
        finally:
            close = getattr(provider, "aclose", None)  # every adapter has one
            if close is not None:
                await close()

    result = anyio.run(_run)
    _print(result, provider_name, as_json)
    if result.failure is not None:
        f = result.failure
        status = f" (HTTP {f.status})" if f.status is not None else ""
        die(f"provider call failed: {f.kind}{status}: {f.detail}", EXIT_RUNTIME)


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
