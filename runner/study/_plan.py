"""``ect plan``: what a locked study will send, cost and take, before the first paid call.

A plan is a simulated pass over the study (the simulated provider, the real sandbox, the same
schedule rows, the same pipelines, budgets and prompts, into a throwaway store), counted:
provider requests by role and pipeline, input and output tokens, dollars at the spec's price
table, and the wall time under the given throttle and concurrency. The simulated provider
decides how long each trajectory is, so every figure is SIMULATED and names its parameters;
the range (min/expected/max) comes from the budgets (docs/providers.md, "Before paying: ect
plan").
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from runner.canonical import JsonValue, loads_strict
from runner.errors import ExitCategory, StudyError
from runner.providers import PriceTable
from runner.study._execute import execute
from runner.study._preflight import PreflightFailed, ProviderChoice, run_preflight
from runner.study._records import CellRecord
from runner.study._settings import RunSettings, throttle_settings
from runner.study._spec import load_spec

__all__ = ["PilotResult", "Plan", "PlanFailed", "PlanRange", "PlanSettings", "plan_study"]

TOKEN_ESTIMATE = ("ceil(bytes / 4) of each canonical request (input) and reply (output), the "
                  "simulated provider's count: no tokenizer was called")


class PlanFailed(StudyError):
    """The simulated pass a plan needs could not run (its preflight failed)."""

    exit_category = ExitCategory.REFUSED


@dataclass(frozen=True, slots=True)
class PlanRange:
    """A figure's least, expected and largest value."""

    min: float
    expected: float
    max: float

    def to_json(self) -> dict[str, JsonValue]:
        return {"min": round(self.min, 9), "expected": round(self.expected, 9),
                "max": round(self.max, 9)}

    def scaled(self, factor: float) -> PlanRange:
        return PlanRange(self.min * factor, self.expected * factor, self.max * factor)


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """What the plan is for: the provider and model (named only: nothing is sent), the cells
    (``limit``), the concurrency, the throttle (None: the spec's; 0: none) and the API's
    typical latency per request (an assumption the plan states)."""

    spec_path: Path
    provider: str = "gemini"
    model: str | None = None
    concurrency: int = 2
    limit: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    latency_s: float = 2.0
    sandbox_backend: str | None = None
    # --pilot: the first ``pilot`` cells are run live into ``pilot_store`` with ``pilot_choice``
    # (a real run: resume it later) and the plan is rescaled from their real usage
    pilot: int | None = None
    pilot_store: Path | None = None
    pilot_choice: ProviderChoice | None = None


@dataclass(frozen=True, slots=True)
class PilotResult:
    """What the live pilot measured beside the simulated pass's figures for the same cells."""

    cells: int
    store: str
    requests: int  # calls (retries not counted), as the simulated pass counts them
    simulated_requests: int
    input_tokens: int
    simulated_input_tokens: int
    output_tokens: int
    simulated_output_tokens: int
    latency_s: float | None  # the mean latency of its answered attempts
    cost_usd: float  # the committed cells' cost

    def to_json(self) -> dict[str, JsonValue]:
        return {"cells": self.cells, "store": self.store, "requests": self.requests,
                "simulated_requests": self.simulated_requests,
                "input_tokens": self.input_tokens,
                "simulated_input_tokens": self.simulated_input_tokens,
                "output_tokens": self.output_tokens,
                "simulated_output_tokens": self.simulated_output_tokens,
                "latency_s": None if self.latency_s is None else round(self.latency_s, 6),
                "cost_usd": round(self.cost_usd, 9)}


@dataclass
class Plan:
    study: str
    provider: str
    model: str
    cells: int
    concurrency: int
    requests_per_minute: int | None
    tokens_per_minute: int | None
    latency_s: float
    price: PriceTable
    requests: PlanRange
    requests_by_role: dict[str, int] = field(default_factory=dict)
    requests_by_pipeline: dict[str, int] = field(default_factory=dict)
    input_tokens: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    output_tokens: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    cost_usd: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    wall_s: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    wall_bound: str = ""  # what bounds the expected wall time
    simulated_pass_s: float = 0.0
    simulator: dict[str, JsonValue] = field(default_factory=dict)
    pilot: PilotResult | None = None

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "study": self.study, "provider": self.provider, "model": self.model,
            "cells": self.cells, "concurrency": self.concurrency,
            "throttle": {"requests_per_minute": self.requests_per_minute,
                         "tokens_per_minute": self.tokens_per_minute},
            "latency_s": self.latency_s,
            "latency_from": "the pilot" if self.pilot is not None
                            and self.pilot.latency_s is not None else "assumed",
            "price": self.price.to_json(),
            "requests": self.requests.to_json(),
            "requests_by_role": dict(sorted(self.requests_by_role.items())),
            "requests_by_pipeline": dict(sorted(self.requests_by_pipeline.items())),
            "input_tokens": self.input_tokens.to_json(),
            "output_tokens": self.output_tokens.to_json(),
            "cost_usd": self.cost_usd.to_json(),
            "wall_s": self.wall_s.to_json(),
            "wall_bound": self.wall_bound,
            "token_estimate": TOKEN_ESTIMATE,
            "simulated": True,
            "simulated_pass_s": round(self.simulated_pass_s, 3),
            "simulator": self.simulator,
            "pilot": self.pilot.to_json() if self.pilot is not None else None,
        }

    def lines(self) -> list[str]:
        def rng(r: PlanRange, fmt: str, unit: str = "") -> str:
            return (f"{unit}{format(r.expected, fmt)} (min {unit}{format(r.min, fmt)}, "
                    f"max {unit}{format(r.max, fmt)})")

        rpm = self.requests_per_minute or "no limit"
        tpm = self.tokens_per_minute or "no limit"
        roles = ", ".join(f"{k} {v}" for k, v in sorted(self.requests_by_role.items()))
        pipes = ", ".join(f"{k} {v}" for k, v in sorted(self.requests_by_pipeline.items()))
        pilot = []
        if self.pilot is not None:
            p = self.pilot
            pilot = [f"with a live pilot of the first {p.cells} cells ({p.store}; their real "
                     "requests replace their simulated ones, tokens a request and latency are "
                     "theirs): "
                     f"{p.requests} requests (simulated {p.simulated_requests}), "
                     f"{p.input_tokens}/{p.output_tokens} input/output tokens (simulated "
                     f"{p.simulated_input_tokens}/{p.simulated_output_tokens}), "
                     f"${p.cost_usd:.4f}"
                     + (f", {p.latency_s:.2f} s a request" if p.latency_s is not None else "")
                     + f"; continue it with `ect resume --store {p.store} --limit N`"]
        latency = ("measured in the pilot" if self.pilot is not None
                   and self.pilot.latency_s is not None else "assumed")
        return [
            f"plan for {self.study}: {self.cells} cells on {self.provider}/{self.model}, "
            f"concurrency {self.concurrency}, {rpm} requests/min, {tpm} tokens/min",
            "SIMULATED: every figure below comes from a simulated pass over the study (the "
            "simulated planner and critic with the spec's [simulated] parameters: "
            + ", ".join(f"{k}={v}" for k, v in sorted(self.simulator.items())) + ")",
            f"provider requests: {rng(self.requests, '.0f')} (the simulated pass by role: "
            f"{roles}; by pipeline: {pipes})",
            f"input tokens: {rng(self.input_tokens, '.0f')}; output tokens: "
            f"{rng(self.output_tokens, '.0f')} (estimate: {TOKEN_ESTIMATE})",
            f"cost at ${self.price.input_per_mtok:g}/${self.price.output_per_mtok:g} per "
            f"million tokens: {rng(self.cost_usd, '.4f', '$')}",
            f"wall time: {rng(self.wall_s, '.0f')} s ({self.wall_bound}; "
            f"{self.latency_s:.2f} s a request {latency})",
            *pilot,
        ]


def _flatten(prefix: str, obj: object, out: dict[str, JsonValue]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(obj, str | int | float | bool) or obj is None:
        out[prefix] = obj


def plan_study(settings: PlanSettings) -> Plan:
    """Plan ``settings``' study (a simulated pass into a throwaway store, then counted).

    Raises:
        SpecError: the spec is malformed.
        PlanFailed: the simulated pass's preflight failed (the lock drifted, no sandbox).
    """
    from runner.providers import PROVIDERS
    from runner.store import Store

    spec = load_spec(settings.spec_path)
    model = settings.model or (spec.model.name if settings.provider in PROVIDERS
                               and not PROVIDERS[settings.provider].simulated
                               else PROVIDERS[settings.provider].default_model
                               if settings.provider in PROVIDERS else None) or spec.model.name
    price = PriceTable(spec.price_input_per_mtok, spec.price_output_per_mtok)
    run = RunSettings(settings.spec_path, Path("plan.db"), ProviderChoice(),
                      concurrency=settings.concurrency, limit=settings.limit,
                      requests_per_minute=settings.requests_per_minute,
                      tokens_per_minute=settings.tokens_per_minute)
    throttle = throttle_settings(run, spec)
    with tempfile.TemporaryDirectory(prefix="ect-plan-") as tmp:
        store_path = Path(tmp) / "plan.db"
        report = run_preflight(settings.spec_path, store_path, ProviderChoice(),
                               sandbox_backend=settings.sandbox_backend, probes="mandatory")
        if not report.passed:
            raise PlanFailed(str(PreflightFailed(report)))
        sim = RunSettings(settings.spec_path, store_path, ProviderChoice(),
                          concurrency=settings.concurrency, limit=settings.limit,
                          sandbox_backend=settings.sandbox_backend, checkpoint_every=10**9,
                          requests_per_minute=0, tokens_per_minute=0)
        summary = execute(sim, preflight=report)
        by_role: Counter[str] = Counter()
        by_pipeline: Counter[str] = Counter()
        tokens_in = tokens_out = 0
        min_requests = max_requests = 0.0
        per_row: dict[int, tuple[int, int, int]] = {}  # row -> requests, input, output tokens
        with Store.open(store_path, readonly=True) as store:
            for rec in store.records(1):
                cell = CellRecord.from_json(rec.body, f"record {rec.seq}")
                policy = cell.schedule_row.policy
                planner = others = 0
                row_in = row_out = 0
                for call in cell.audit.calls:
                    role = "unknown"
                    if call.raw:
                        body = loads_strict(store.get_blob(call.raw[0].request))
                        if isinstance(body, dict) and isinstance(body.get("role"), str):
                            role = body["role"]
                    by_role[role] += 1
                    by_pipeline[policy] += 1
                    if role == "planner":
                        planner += 1
                    else:
                        others += 1
                    for a in call.attempts:
                        if a.usage is not None:
                            row_in += a.usage.input_tokens
                            row_out += a.usage.output_tokens
                tokens_in += row_in
                tokens_out += row_out
                per_row[cell.row] = (len(cell.audit.calls), row_in, row_out)
                # the budgets: at least one planner call (and the calls a finish costs this
                # pipeline), at most max_decisions planner calls, each with as many other calls
                ratio = others / planner if planner else 0.0
                min_requests += 1 + (math.ceil(ratio) if others else 0)
                max_requests += spec.budget.max_decisions * (1 + math.ceil(ratio))
    expected = float(sum(by_role.values()))
    per_request_in = tokens_in / expected if expected else 0.0
    per_request_out = tokens_out / expected if expected else 0.0
    latency_s = settings.latency_s
    pilot = None
    if settings.pilot:
        # The pilot's cells count as what they really sent; the other cells stay as simulated
        # (the first cells in canonical order are one task's: a ratio taken from them would
        # not carry over to the others). Tokens a request and the latency are the pilot's.
        pilot = _run_pilot(settings, per_row)
        expected += pilot.requests - pilot.simulated_requests
        if pilot.requests:
            per_request_in = pilot.input_tokens / pilot.requests
            per_request_out = pilot.output_tokens / pilot.requests
        if pilot.latency_s is not None:
            latency_s = pilot.latency_s
    requests = PlanRange(min(min_requests, expected), expected, max(max_requests, expected))
    input_tokens = requests.scaled(per_request_in)
    output_tokens = requests.scaled(per_request_out)
    def dollars(i: float, o: float) -> float:
        return (i * price.input_per_mtok + o * price.output_per_mtok) / 1_000_000

    cost = PlanRange(dollars(input_tokens.min, output_tokens.min),
                     dollars(input_tokens.expected, output_tokens.expected),
                     dollars(input_tokens.max, output_tokens.max))
    tool_s = summary.wall_s  # the simulated pass: tools in the sandbox, no model latency

    def wall(n: float, tok: float) -> tuple[float, str]:
        bounds = [(tool_s + n * latency_s / settings.concurrency,
                   "tool calls and model latency at this concurrency")]
        if throttle.requests_per_minute:
            bounds.append((n * 60.0 / throttle.requests_per_minute, "the requests-per-minute "
                           "throttle"))
        if throttle.tokens_per_minute:
            bounds.append((tok * 60.0 / throttle.tokens_per_minute, "the tokens-per-minute "
                           "throttle"))
        return max(bounds)

    total = (input_tokens.min + output_tokens.min, input_tokens.expected + output_tokens.expected,
             input_tokens.max + output_tokens.max)
    w_min, _ = wall(requests.min, total[0])
    w_exp, bound = wall(requests.expected, total[1])
    w_max, _ = wall(requests.max, total[2])
    simulator: dict[str, JsonValue] = {}
    _flatten("simulated", spec.simulated, simulator)
    return Plan(
        study=spec.name, provider=settings.provider, model=str(model), cells=summary.committed,
        concurrency=settings.concurrency, requests_per_minute=throttle.requests_per_minute,
        tokens_per_minute=throttle.tokens_per_minute, latency_s=latency_s,
        price=price, requests=requests, requests_by_role=dict(by_role),
        requests_by_pipeline=dict(by_pipeline), input_tokens=input_tokens,
        output_tokens=output_tokens, cost_usd=cost, wall_s=PlanRange(w_min, w_exp, w_max),
        wall_bound=bound, simulated_pass_s=summary.wall_s, simulator=simulator, pilot=pilot)


def _run_pilot(settings: PlanSettings, per_row: dict[int, tuple[int, int, int]]) -> PilotResult:
    """Run the first ``settings.pilot`` cells live (a real run into ``pilot_store``, resumable)
    and measure them beside the simulated pass's figures for the same rows."""
    from runner.store import Store
    from runner.study._workflow import run_study

    assert settings.pilot is not None
    if settings.pilot_store is None or settings.pilot_choice is None:
        raise StudyError("--pilot needs --pilot-store and a provider to run the pilot on")
    run = RunSettings(settings.spec_path, settings.pilot_store, settings.pilot_choice,
                      concurrency=settings.concurrency, limit=settings.pilot,
                      sandbox_backend=settings.sandbox_backend,
                      requests_per_minute=settings.requests_per_minute,
                      tokens_per_minute=settings.tokens_per_minute)
    summary = run_study(run)
    calls = tokens_in = tokens_out = 0
    sim_calls = sim_in = sim_out = 0
    latencies: list[float] = []
    with Store.open(settings.pilot_store, readonly=True) as store:
        for rec in store.records(1):
            cell = CellRecord.from_json(rec.body, f"record {rec.seq}")
            calls += len(cell.audit.calls)
            for call in cell.audit.calls:
                for a in call.attempts:
                    if a.usage is not None:
                        tokens_in += a.usage.input_tokens
                        tokens_out += a.usage.output_tokens
                    if a.error_class is None and a.latency_s is not None:
                        latencies.append(a.latency_s)
            n, i, o = per_row.get(cell.row, (0, 0, 0))
            sim_calls, sim_in, sim_out = sim_calls + n, sim_in + i, sim_out + o
    return PilotResult(
        cells=summary.committed, store=str(settings.pilot_store), requests=calls,
        simulated_requests=sim_calls, input_tokens=tokens_in, simulated_input_tokens=sim_in,
        output_tokens=tokens_out, simulated_output_tokens=sim_out,
        latency_s=sum(latencies) / len(latencies) if latencies else None,
        cost_usd=summary.cost_usd)
