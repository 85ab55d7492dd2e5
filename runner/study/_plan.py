"""``ect plan``: what a locked study will send, cost and take, before the first paid call.

A plan is a simulated pass over the study (the simulated provider, the real sandbox, the same
schedule rows, the same pipelines, budgets and prompts, into a throwaway store), counted:
provider requests by role and pipeline, input and output tokens, dollars at the spec's price
table, and the wall time under the given throttle and concurrency. The simulated provider
decides how long each trajectory is, so every figure is SIMULATED and names its parameters;
the range (min/expected/max) comes from the budgets (docs/providers.md, "Before paying: ect
plan").

A real model's trajectories are not the simulated planner's: nothing before its first reply says
how long they are. ``--pilot N`` therefore runs N cells live and rescales the plan from what
they really sent: by default N cells spread over the study's strata (checkpoint, fault and
pipeline, evenly over tasks, faults and seeds within each), whose ratio of real to simulated requests
carries over to the other cells, with its sampling error stated; or (``pilot_cells="first"``)
the first N cells, a resumable prefix of the run, whose real requests replace only their own
simulated ones.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from runner.canonical import JsonRecord, JsonValue, derived, loads_strict, rounded, sorted_map, spec
from runner.errors import ExitCategory, StudyError
from runner.providers import PriceTable
from runner.study._execute import execute
from runner.study._preflight import PreflightFailed, ProviderChoice, run_preflight
from runner.study._records import CellRecord, ScheduleRow
from runner.study._settings import RunSettings, throttle_settings
from runner.study._spec import load_spec

__all__ = ["PILOT_CELLS", "PilotResult", "Plan", "PlanFailed", "PlanRange", "PlanSettings",
           "pilot_rows", "plan_study"]

# How --pilot picks its cells: "spread" over the strata (a sample: not a resumable run) or the
# "first" N rows (a prefix of the run: ect resume continues it).
PILOT_CELLS = ("spread", "first")
# The throttle spaces attempts a hair over 60/N s apart (runner/providers/_throttle.py).
_THROTTLE_SPACING = 1.001

TOKEN_ESTIMATE = ("ceil(bytes / 4) of each canonical request (input) and reply (output), the "
                  "simulated provider's count: no tokenizer was called")


class PlanFailed(StudyError):
    """The simulated pass a plan needs could not run (its preflight failed)."""

    exit_category = ExitCategory.REFUSED


@dataclass(frozen=True, slots=True)
class PlanRange(JsonRecord):
    """A figure's least, expected and largest value (written rounded to 9 decimals)."""

    min: float = field(metadata=spec(write=rounded(9)))
    expected: float = field(metadata=spec(write=rounded(9)))
    max: float = field(metadata=spec(write=rounded(9)))

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
    # --pilot: ``pilot`` cells are run live into ``pilot_store`` with ``pilot_choice`` and the
    # plan is rescaled from their real usage; ``pilot_cells`` says which cells (PILOT_CELLS)
    pilot: int | None = None
    pilot_store: Path | None = None
    pilot_choice: ProviderChoice | None = None
    pilot_cells: str = "spread"
    pilot_probes: str = "all"  # the pilot's preflight probes, as a run's ("mandatory": fewer)


@dataclass(frozen=True, slots=True, kw_only=True)
class PilotResult(JsonRecord):
    """What the live pilot measured beside the simulated pass's figures for the same cells
    (fields in the order of its JSON)."""

    cells: int
    store: str
    sampling: str  # PILOT_CELLS
    rows: tuple[int, ...]  # the schedule rows it ran
    requests: int  # calls (retries not counted), as the simulated pass counts them
    simulated_requests: int
    attempts: int  # every attempt, retries included
    # "spread": real / simulated requests over the pilot's cells, and that ratio's standard
    # error (a ratio estimator's, from the spread of its cells); None for "first"
    ratio: float | None = field(default=None, metadata=spec(write=rounded(6)))
    ratio_se: float | None = field(default=None, metadata=spec(write=rounded(6)))
    wall_s: float = field(default=0.0, metadata=spec(write=rounded(3)))  # the pilot's wall time
    input_tokens: int
    simulated_input_tokens: int
    output_tokens: int
    simulated_output_tokens: int
    latency_s: float | None = field(metadata=spec(write=rounded(6)))  # mean, answered attempts
    cost_usd: float = field(metadata=spec(write=rounded(9)))  # the committed cells' cost

    @property
    def retry_factor(self) -> float:
        """Attempts a call in the pilot (1.0: no retry)."""
        return self.attempts / self.requests if self.requests else 1.0


@dataclass(kw_only=True)
class Plan(JsonRecord):
    study: str
    provider: str
    model: str
    cells: int
    concurrency: int
    requests_per_minute: int | None = field(metadata=spec(key="throttle.requests_per_minute"))
    tokens_per_minute: int | None = field(metadata=spec(key="throttle.tokens_per_minute"))
    latency_s: float
    latency_from: str = derived(lambda p: "the pilot" if p.pilot is not None
                                and p.pilot.latency_s is not None else "assumed")
    price: PriceTable
    requests: PlanRange
    # the expected requests' standard error from a spread pilot's sampling (None: no such pilot)
    requests_se: float | None = field(default=None, metadata=spec(write=rounded(6)))
    pilot_cells_for_10pct: int | None = derived(lambda p: p.pilot_cells_for(0.10))
    requests_by_role: dict[str, int] = field(default_factory=dict,
                                             metadata=spec(write=sorted_map))
    requests_by_pipeline: dict[str, int] = field(default_factory=dict,
                                                 metadata=spec(write=sorted_map))
    input_tokens: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    output_tokens: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    cost_usd: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    wall_s: PlanRange = field(default_factory=lambda: PlanRange(0, 0, 0))
    wall_bound: str = ""  # what bounds the expected wall time
    # seconds a throttled run takes beyond its spaced attempts, from the pilot (0: no pilot)
    throttle_overhead_s: float = field(default=0.0, metadata=spec(write=rounded(3)))
    token_estimate: str = field(default=TOKEN_ESTIMATE, init=False)
    simulated: bool = field(default=True, init=False)
    simulated_pass_s: float = field(default=0.0, metadata=spec(write=rounded(3)))
    simulator: dict[str, JsonValue] = field(default_factory=dict)
    pilot: PilotResult | None = None

    def pilot_cells_for(self, within: float = 0.10) -> int | None:
        """About how many spread-pilot cells bring one standard error of the expected requests
        within ``within`` of them (the error falls as one over the root of the pilot's size;
        None: no spread pilot, or no error measured)."""
        if self.pilot is None or self.requests_se is None or not self.requests.expected:
            return None
        rel = self.requests_se / self.requests.expected
        return max(self.pilot.cells, math.ceil(self.pilot.cells * (rel / within) ** 2))

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
            measured = (f"{p.requests} requests, {p.attempts} attempts (simulated "
                        f"{p.simulated_requests}), "
                        f"{p.input_tokens}/{p.output_tokens} input/output tokens (simulated "
                        f"{p.simulated_input_tokens}/{p.simulated_output_tokens}), "
                        f"${p.cost_usd:.4f}"
                        + (f", {p.latency_s:.2f} s a request" if p.latency_s is not None
                           else ""))
            if p.sampling == "first":
                pilot = [f"with a live pilot of the first {p.cells} cells ({p.store}; their real "
                         "requests replace their simulated ones, tokens a request, attempts a "
                         f"request and latency are theirs): {measured}; continue it with "
                         f"`ect resume --store {p.store} --limit N`"]
            else:
                ratio = "" if p.ratio is None else f"{p.ratio:.3f}"
                if p.ratio_se is not None:
                    ratio += f" ± {p.ratio_se:.3f}"
                se = ("" if self.requests_se is None
                      else f"; expected requests ± {self.requests_se:.0f} (one standard error "
                           f"of the sample; about {self.pilot_cells_for(0.10)} pilot cells "
                           "bring it within 10%)")
                pilot = [f"with a live pilot of {p.cells} cells spread over the strata "
                         f"({p.store}, a sample the run does not continue; rows "
                         + ", ".join(str(r) for r in p.rows)
                         + "): the other cells' simulated requests times the pilot's real/"
                         f"simulated ratio {ratio}, tokens a request, attempts a request and "
                         f"latency are the pilot's{se}: {measured}"]
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
            f"{self.latency_s:.2f} s a request {latency}"
            + (f"; {self.throttle_overhead_s:.1f} s beyond the throttle's spacing, measured in "
               "the pilot" if self.throttle_overhead_s else "") + ")",
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
        rows: dict[int, ScheduleRow] = {}
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
                rows[cell.row] = cell.schedule_row
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
    requests_se = None
    if settings.pilot:
        pilot = _run_pilot(settings, [rows[r] for r in sorted(rows)], per_row)
        expected, requests_se = _rescale(pilot, per_row)
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

    spacing = (_THROTTLE_SPACING * 60.0 / throttle.requests_per_minute
               if throttle.requests_per_minute else 0.0)
    # what a run takes beyond its throttled attempts (starting, the last cells' tools and
    # commits), as the pilot measured it under the same throttle
    overhead_s = 0.0
    if pilot is not None and spacing and pilot.attempts:
        overhead_s = max(0.0, pilot.wall_s - ((pilot.attempts - 1) * spacing + latency_s))

    def wall(n: float, tok: float) -> tuple[float, str]:
        bounds = [(tool_s + n * latency_s / settings.concurrency,
                   "tool calls and model latency at this concurrency")]
        if spacing:
            # the first attempt goes at once, each next one a spacing later, and the last
            # reply takes a latency
            bounds.append((max(0.0, n - 1) * spacing + latency_s + overhead_s,
                           "the requests-per-minute throttle"))
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
        wall_bound=bound, simulated_pass_s=summary.wall_s, simulator=simulator, pilot=pilot,
        requests_se=requests_se, throttle_overhead_s=overhead_s)


def pilot_rows(rows: list[ScheduleRow], n: int, sampling: str = "spread") -> list[ScheduleRow]:
    """The ``n`` rows a pilot runs, in schedule order: the first ``n`` (``"first"``), or
    (``"spread"``) ``n`` spread over the strata -- (checkpoint, pipeline), in the order they
    first appear -- as evenly as ``n`` allows (round robin), each stratum's share evenly spaced
    over its rows (so over its tasks, their faults and the seeds), the i-th of K strata starting
    (i + 1/2)/K of a spacing in, so that one cell a stratum does not take every stratum's cell
    from the same task."""
    if sampling not in PILOT_CELLS:
        raise ValueError(f"pilot sampling must be one of {PILOT_CELLS}, not {sampling!r}")
    n = min(n, len(rows))
    if sampling == "first":
        return rows[:n]
    strata: dict[tuple[str, str], list[ScheduleRow]] = {}
    for r in rows:
        strata.setdefault((r.checkpoint, r.policy), []).append(r)
    share = dict.fromkeys(strata, 0)
    keys, k = list(strata), 0
    for _ in range(n):
        while share[keys[k % len(keys)]] >= len(strata[keys[k % len(keys)]]):
            k += 1
        share[keys[k % len(keys)]] += 1
        k += 1
    picked = [members[int((j + (i + 0.5) / len(keys)) * len(members) / share[key])]
              for i, (key, members) in enumerate(strata.items()) for j in range(share[key])]
    return sorted(picked, key=lambda r: r.row)


def _rescale(pilot: PilotResult, per_row: dict[int, tuple[int, int, int]]
             ) -> tuple[float, float | None]:
    """The expected provider attempts given the pilot, and its standard error (spread only).

    ``"first"``: the pilot's cells count as what they really sent, the other cells as
    simulated (the first cells in canonical order are one task's: a ratio taken from them does
    not carry over). ``"spread"``: the pilot's cells as sent, every other cell's simulated
    requests times the pilot's ratio of real to simulated requests (a ratio estimator; its
    standard error from the spread of the pilot's cells around that ratio). Either way times
    the pilot's attempts a call (its retries).
    """
    ran = set(pilot.rows)
    rest = sum(n for row, (n, _, _) in per_row.items() if row not in ran)
    if pilot.sampling == "first" or pilot.ratio is None:
        return (pilot.requests + rest) * pilot.retry_factor, None
    se = None if pilot.ratio_se is None else rest * pilot.ratio_se * pilot.retry_factor
    return (pilot.requests + rest * pilot.ratio) * pilot.retry_factor, se


def _ratio(real: list[int], simulated: list[int], population: int) -> tuple[float | None,
                                                                          float | None]:
    """A ratio estimator (sum real / sum simulated) and its standard error, with the finite
    population correction for ``population`` cells (None: no simulated request, or one cell)."""
    n, xs = len(real), sum(simulated)
    if not n or not xs:
        return None, None
    ratio = sum(real) / xs
    if n < 2:
        return ratio, None
    residuals = sum((y - ratio * x) ** 2 for y, x in zip(real, simulated, strict=True)) / (n - 1)
    fpc = max(0.0, 1.0 - n / population) if population else 0.0
    return ratio, math.sqrt(fpc * residuals / n) / (xs / n)


def _run_pilot(settings: PlanSettings, rows: list[ScheduleRow],
               per_row: dict[int, tuple[int, int, int]]) -> PilotResult:
    """Run the pilot's cells live (a real run into ``pilot_store``) and measure them beside the
    simulated pass's figures for the same rows."""
    import dataclasses

    from runner.store import Store
    from runner.study._execute import refuse_if_locked

    assert settings.pilot is not None
    if settings.pilot_store is None or settings.pilot_choice is None:
        raise StudyError("--pilot needs --pilot-store and a provider to run the pilot on")
    sample = pilot_rows(rows, settings.pilot, settings.pilot_cells)
    run = RunSettings(settings.spec_path, settings.pilot_store, settings.pilot_choice,
                      concurrency=settings.concurrency,
                      limit=settings.pilot if settings.pilot_cells == "first" else None,
                      sandbox_backend=settings.sandbox_backend,
                      requests_per_minute=settings.requests_per_minute,
                      tokens_per_minute=settings.tokens_per_minute)
    # a new store (run_study's refusals, the same preflight as a run's, then the cells); a spread
    # sample is not a prefix of the run, so a resume's preflight refuses its store
    load_spec(settings.spec_path)
    refuse_if_locked(settings.pilot_store)
    if settings.pilot_store.exists():
        raise StudyError(f"{settings.pilot_store} exists: the pilot writes a new store")
    report = run_preflight(settings.spec_path, settings.pilot_store, settings.pilot_choice,
                           sandbox_backend=settings.sandbox_backend,
                           probes=settings.pilot_probes)
    if not report.passed:
        raise PreflightFailed(report)
    if settings.pilot_cells == "spread":
        report = dataclasses.replace(report, rows=sample)
    summary = execute(run, preflight=report)
    calls = attempts = tokens_in = tokens_out = 0
    real: list[int] = []
    simulated: list[int] = []
    ran: list[int] = []
    latencies: list[float] = []
    with Store.open(settings.pilot_store, readonly=True) as store:
        for rec in store.records(1):
            cell = CellRecord.from_json(rec.body, f"record {rec.seq}")
            calls += len(cell.audit.calls)
            ran.append(cell.row)
            for call in cell.audit.calls:
                attempts += len(call.attempts)
                for a in call.attempts:
                    if a.usage is not None:
                        tokens_in += a.usage.input_tokens
                        tokens_out += a.usage.output_tokens
                    if a.error_class is None and a.latency_s is not None:
                        latencies.append(a.latency_s)
            real.append(len(cell.audit.calls))
            simulated.append(per_row.get(cell.row, (0, 0, 0))[0])
    sim_in = sum(per_row.get(r, (0, 0, 0))[1] for r in ran)
    sim_out = sum(per_row.get(r, (0, 0, 0))[2] for r in ran)
    ratio = ratio_se = None
    if settings.pilot_cells == "spread":
        ratio, ratio_se = _ratio(real, simulated, len(per_row))
    return PilotResult(
        cells=summary.committed, store=str(settings.pilot_store), requests=calls,
        simulated_requests=sum(simulated), attempts=attempts, sampling=settings.pilot_cells,
        rows=tuple(ran), input_tokens=tokens_in, simulated_input_tokens=sim_in,
        output_tokens=tokens_out, simulated_output_tokens=sim_out,
        latency_s=sum(latencies) / len(latencies) if latencies else None,
        cost_usd=summary.cost_usd, ratio=ratio, ratio_se=ratio_se, wall_s=summary.wall_s)
