"""Running the static study: 7 policies x 432 snapshots, plus ECT under each prespecified
single-check ablation (the analysis of the rows is ``runner.analysis``).

``run_static`` decides every snapshot of ``runner.worlds.static_grid()`` with every arm of
``runner.policies.STATIC_ARMS`` (and ECT once per ablation of :data:`STATIC_ABLATIONS`), through
``runner.policies.decide_static``; the model-backed arms go through the provider given (the
simulated provider by default, :func:`static_provider`).

The critic core's fast-path invariant is enforced twice: the policy raises
``CriticCoreInvariantBroken`` when it would need its model, and the provider handed to the
critic core here is a tripwire whose ``generate`` aborts the run (``FastPathInvariantBroken``);
a decision reporting a model call or a provider result from the critic core aborts too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar, overload

import anyio

from runner.canonical import (
    MAX_TOML_BYTES,
    Count,
    JsonObject,
    JsonRecord,
    loads_toml,
    raw_digest,
    read_bounded,
    spec,
)
from runner.errors import ExitCategory, FormatError, StudyError
from runner.policies import STATIC_ARMS
from runner.providers import PROVIDERS
from runner.worlds import STATIC_FAULTS

if TYPE_CHECKING:
    from runner.policies import StaticDecision
    from runner.providers import (
        AttemptObserver,
        GenerationConfig,
        Provider,
        ProviderRequest,
    )
    from runner.worlds import Snapshot

__all__ = [
    "STATIC_ABLATIONS",
    "TABLE3_ABLATIONS",
    "CheckAblation",
    "FastPathInvariantBroken",
    "SpecInvalid",
    "StaticDecisionRow",
    "StaticGeneration",
    "StaticRun",
    "StaticSpec",
    "run_static",
    "static_provider",
]


class SpecInvalid(StudyError):
    """The static-study spec (schedules/static.toml) is missing a field or has a bad value."""

    exit_category = ExitCategory.USAGE


class FastPathInvariantBroken(StudyError):
    """The critic core called the model on a static snapshot; the frozen comparison is void."""

    exit_category = ExitCategory.RUNTIME


@dataclass(frozen=True, slots=True)
class CheckAblation(JsonRecord):
    """One prespecified single-check ablation of ECT: a row of the ECT paper's Table 3.

    ``removes`` is what ``runner.policies.decide_static(..., ablate=...)`` switches off: the
    reason codes of one verifier check, a whole verifier step when the step is one check
    (``replay``, ``transform``), or ``recovery`` (the recovery-availability rule). The
    ``paper_*`` fields quote the paper; ``matched`` says why this check is the one matched to
    the fault, in this project's words. ``fault`` is a static fault of the registry
    (``runner.worlds.FAULTS``), named in ``matched``, or ``None``.
    """

    name: str
    paper_check: str
    removes: tuple[str, ...]
    fault: str | None
    paper_target: str
    paper_fault: str
    measure: str
    matched: str

    def __post_init__(self) -> None:
        if self.fault is not None and (
            self.fault not in STATIC_FAULTS or self.fault not in self.matched
        ):
            raise StudyError(
                f"ablation {self.name}: the matched fault {self.fault!r} must be a static fault "
                f"of the registry ({', '.join(STATIC_FAULTS)}) named in its 'matched' words"
            )




TABLE3_ABLATIONS: tuple[CheckAblation, ...] = (
    CheckAblation(
        name="claim_coverage",
        paper_check="Claim coverage",
        removes=("coverage.missing_slot",),
        fault="F5",
        paper_target="Partial coverage",
        paper_fault="One required answer slot omitted",
        measure="U",
        matched="the check that every required slot has a claim (coverage.missing_slot); F5 "
        "drops one required slot's claim",
    ),
    CheckAblation(
        name="task_scope",
        paper_check="Task/scope",
        removes=("scope.entity_mismatch", "scope.attribute_mismatch", "scope.level_mismatch",
                 "scope.date_mismatch"),
        fault="F4",
        paper_target="Scope mismatch",
        paper_fault="Entity or date scope changed",
        measure="U",
        matched="the check that each cited receipt lies in the slot's scope (entity, "
        "attribute, level, dates), not the cardinality checks; F4 moves a receipt's scope",
    ),
    CheckAblation(
        name="outcome_validation",
        paper_check="Outcome/validation",
        removes=("evidence.exec_error", "evidence.invalid"),
        fault="F3",
        paper_target="Nested error",
        paper_fault="Nested tool error beneath transport success",
        measure="U",
        matched="status only: the checks that each cited receipt's call succeeded "
        "(evidence.exec_error) and passed validation (evidence.invalid); F3 nests an error "
        "under a transport success",
    ),
    CheckAblation(
        name="ledger_reference",
        paper_check="Ledger/reference",
        removes=("evidence.unknown_receipt",),
        fault="F7",
        paper_target="Forged reference",
        paper_fault="Claim cites a receipt absent from the trace",
        measure="U",
        matched="the check that each cited receipt id is in the ledger "
        "(evidence.unknown_receipt); F7 cites a receipt absent from the trace",
    ),
    CheckAblation(
        name="value_replay",
        paper_check="Value replay",
        removes=("replay",),
        fault="F6",
        paper_target="Synth. corruption",
        paper_fault="Supported value altered after retrieval",
        measure="U",
        matched="the exact recomputation of each claimed value (verifier step 4d, every "
        "replay.* code); F6 alters a supported value",
    ),
    CheckAblation(
        name="exact_transform",
        paper_check="Exact transform",
        removes=("transform",),
        fault=None,
        paper_target="No matched fault",
        paper_fault="(none: the exact-transform-contract ablation has no matched fault in the "
        "frozen eight-fault grid)",
        measure="U",
        matched="the check that a claim's op and params are among those the contract permits "
        "(verifier step 4c, every transform.* code); no static fault targets it",
    ),
    CheckAblation(
        name="recovery_check",
        paper_check="Recovery check",
        removes=("recovery",),
        fault="F8",
        paper_target="Stagnation",
        paper_fault="Repeated call despite available recovery",
        measure="S",
        matched="the recovery-availability rule (a repeated call is stuck only when no "
        "recovery call is left); F8 repeats a call while recovery is available",
    ),
)
"""The single-check ablations of the paper's Table 3, in its order, each matched to the fault
whose containment it tests (the fault-to-check matching, with the paper's words beside it)."""

_matched = [a.fault for a in TABLE3_ABLATIONS if a.fault is not None]
if len(set(_matched)) != len(_matched):
    raise StudyError("TABLE3_ABLATIONS: a fault is matched to two checks")

STATIC_ABLATIONS: tuple[str, ...] = tuple(a.name for a in TABLE3_ABLATIONS)
"""The names of :data:`TABLE3_ABLATIONS` (the ``ablate`` field of the decision rows)."""


SPEC_FORMAT = "ect.static-spec/1"
# ------------------------------------------------------------------------------ the spec


_T = TypeVar("_T")


@overload
def _get(table: Mapping[str, object], key: str, typ: type[_T], where: str) -> _T: ...


@overload
def _get(table: Mapping[str, object], key: str, typ: tuple[type[int], type[float]],
         where: str) -> int | float: ...


def _get(table: Mapping[str, object], key: str, typ: type | tuple[type, ...],
         where: str) -> object:
    """``table[key]`` if it is of type ``typ`` (a boolean is never a number), else SpecInvalid."""
    if key not in table:
        raise SpecInvalid(f"static spec: missing {where}.{key}")
    value = table[key]
    if isinstance(value, bool) and typ is not bool:
        raise SpecInvalid(f"static spec: {where}.{key} must not be a boolean")
    if not isinstance(value, typ):
        raise SpecInvalid(f"static spec: {where}.{key} has the wrong type ({type(value).__name__})")
    return value


def _only(table: Mapping[str, object], keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise SpecInvalid(f"static spec: unknown key(s) in {where}: {', '.join(unknown)}")


@dataclass(frozen=True, slots=True)
class StaticGeneration(JsonRecord):
    """The static spec's ``[generation]`` table: the sampling settings of every model call."""

    temperature: float
    seed: int
    max_output_tokens: int
    top_p: float | None

    def config(self) -> GenerationConfig:
        from runner.providers import GenerationConfig

        return GenerationConfig(temperature=self.temperature, seed=self.seed,
                                max_output_tokens=self.max_output_tokens, top_p=self.top_p)


_PROVIDER = spec(skip=True)  # not in the results' record of the spec


@dataclass(frozen=True, kw_only=True)
class StaticSpec(JsonRecord):
    """``schedules/static.toml``, parsed strictly (unknown or missing keys are errors); written
    (with the results) as its digest and what decides them, not its provider settings."""

    sha256: str
    seed: int
    replicates: int = field(metadata=spec(key="bootstrap_replicates"))
    confidence: float
    generation: StaticGeneration
    critic: dict[str, float] = field(metadata=spec(key="simulated_critic"))
    price: dict[str, float] = field(metadata=spec(key="price_usd_per_mtok"))
    provider_default: str = field(metadata=_PROVIDER)
    simulated_model: str = field(metadata=_PROVIDER)
    gemini_model: str = field(metadata=_PROVIDER)
    openai_model: str = field(metadata=_PROVIDER)
    openai_base_url: str = field(metadata=_PROVIDER)
    timeout_s: float = field(metadata=_PROVIDER)

    @classmethod
    def load(cls, path: str | Path) -> StaticSpec:
        try:
            data = read_bounded(path, limit=MAX_TOML_BYTES, what="static spec")
        except OSError as e:
            raise SpecInvalid(f"cannot read static spec {path}: {e.strerror}") from e
        except FormatError as e:
            raise SpecInvalid(str(e)) from e
        return cls.parse(data)

    @classmethod
    def parse(cls, data: bytes) -> StaticSpec:
        try:
            doc = loads_toml(data, what="static spec")
        except FormatError as e:
            raise SpecInvalid(str(e)) from e
        _only(
            doc, {"format", "analysis", "provider", "generation", "simulated", "price"}, "top level"
        )
        if doc.get("format") != SPEC_FORMAT:
            raise SpecInvalid(f"static spec: format must be {SPEC_FORMAT!r}")
        an = _get(doc, "analysis", dict, "spec")
        _only(an, {"seed", "bootstrap_replicates", "confidence"}, "analysis")
        pv = _get(doc, "provider", dict, "spec")
        _only(
            pv,
            {
                "default",
                "simulated_model",
                "gemini_model",
                "openai_model",
                "openai_base_url",
                "timeout_s",
            },
            "provider",
        )
        gen = _get(doc, "generation", dict, "spec")
        _only(gen, {"temperature", "seed", "max_output_tokens", "top_p"}, "generation")
        sim = _get(doc, "simulated", dict, "spec")
        _only(sim, {"critic"}, "simulated")
        critic = _get(sim, "critic", dict, "simulated")
        price = _get(doc, "price", dict, "spec")
        _only(price, {"input_per_mtok", "output_per_mtok"}, "price")
        seed = _get(an, "seed", int, "analysis")
        reps = _get(an, "bootstrap_replicates", int, "analysis")
        conf = float(_get(an, "confidence", (int, float), "analysis"))
        if seed < 0 or reps < 1 or not 0 < conf < 1:
            raise SpecInvalid(
                "static spec: analysis needs seed >= 0, replicates >= 1, 0 < confidence < 1"
            )
        default = _get(pv, "default", str, "provider")
        if default not in PROVIDERS:
            raise SpecInvalid(
                f"static spec: provider.default must be one of {', '.join(PROVIDERS)}"
            )
        generation = StaticGeneration(
            temperature=float(_get(gen, "temperature", (int, float), "generation")),
            seed=_get(gen, "seed", int, "generation"),
            max_output_tokens=_get(gen, "max_output_tokens", int, "generation"),
            top_p=float(gen["top_p"]) if "top_p" in gen else None,
        )
        for k, v in critic.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                raise SpecInvalid(f"static spec: simulated.critic.{k} must be a number in [0, 1]")
        prices = {
            k: float(_get(price, k, (int, float), "price"))
            for k in ("input_per_mtok", "output_per_mtok")
        }
        if min(prices.values()) < 0:
            raise SpecInvalid("static spec: prices must be non-negative")
        return cls(
            seed=seed,
            replicates=reps,
            confidence=conf,
            provider_default=default,
            simulated_model=_get(pv, "simulated_model", str, "provider"),
            gemini_model=_get(pv, "gemini_model", str, "provider"),
            openai_model=_get(pv, "openai_model", str, "provider"),
            openai_base_url=_get(pv, "openai_base_url", str, "provider"),
            timeout_s=float(_get(pv, "timeout_s", (int, float), "provider")),
            generation=generation,
            critic={k: float(v) for k, v in sorted(critic.items())},
            price=prices,
            sha256=raw_digest(data),
        )


# ------------------------------------------------------------------------------- the run


class _Tripwire:
    """The provider handed to the critic core: any model call aborts the static study."""

    name = "critic-core-tripwire"
    model = "none"
    simulated = True

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: ProviderRequest, *,
                       observer: AttemptObserver | None = None) -> NoReturn:
        self.calls += 1
        raise FastPathInvariantBroken(
            "the critic core called its model on a static snapshot; the frozen static "
            "comparison requires its deterministic fast paths (run aborted)"
        )


Decide = Callable[..., Awaitable["StaticDecision"]]


@dataclass
class StaticRun:
    """Decision rows (one per snapshot x arm, plus ECT ablations) and the provider audit."""

    rows: list[StaticDecisionRow] = field(default_factory=list)
    attempts: list[JsonObject] = field(default_factory=list)
    """Attempt records without wall-clock or random fields (deterministic)."""
    journal: list[JsonObject] = field(default_factory=list)
    """Full attempt records, wall clock included (the audit journal; not byte-stable)."""


@dataclass(frozen=True, slots=True)
class StaticDecisionRow(JsonRecord):
    """One static decision (a snapshot decided by one arm, under one ablation or none): the row
    ``runner.analysis.analyse_static`` counts and ``decisions.jsonl`` lists. ``ablate`` is ``""`` without one."""

    _path = "decision_row"

    snapshot_id: str
    task_id: str
    world_id: str
    family: str
    split: str
    condition: str
    gold: str
    arm: str
    ablate: str
    decision: str
    reasons: tuple[str, ...]
    reason_families: tuple[str, ...]
    model_calls: Count
    attempts: Count
    retries: Count
    provider_failure: bool
    input_tokens: Count
    output_tokens: Count
    cost_usd: int | float

def _row(snapshot: Snapshot, arm: str, ablate: str, decision: StaticDecision, cost: float
         ) -> StaticDecisionRow:
    result = decision.provider_result
    usage = result.usage if result is not None else None
    codes = sorted({r.code for r in decision.reasons})
    return StaticDecisionRow(
        snapshot_id=str(snapshot.snapshot_id),
        task_id=snapshot.task.task_id,
        world_id=snapshot.task.world_id,
        family=snapshot.task.family,
        split=snapshot.task.split,
        condition=snapshot.condition,
        gold=snapshot.gold_decision,
        arm=arm,
        ablate=ablate,
        decision=decision.decision,
        reasons=tuple(codes),
        reason_families=tuple(sorted({c.split(".", 1)[0] for c in codes})),
        model_calls=int(decision.model_calls),
        attempts=len(result.attempts) if result is not None else 0,
        retries=sum(1 for a in result.attempts if a.retry) if result is not None else 0,
        provider_failure=bool(result is not None and not result.ok),
        input_tokens=int(usage.input_tokens) if usage is not None else 0,
        output_tokens=int(usage.output_tokens) if usage is not None else 0,
        cost_usd=cost,
    )


async def run_static(
    spec: StaticSpec,
    provider: Provider,
    *,
    snapshots: Sequence[Snapshot] | None = None,
    decide: Decide | None = None,
    arms: Sequence[str] = STATIC_ARMS,
    ablations: Sequence[CheckAblation] = TABLE3_ABLATIONS,
    concurrency: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> StaticRun:
    """Decide every snapshot with every arm, and with ECT under each of ``ablations``.

    ``snapshots`` defaults to ``runner.worlds.static_grid()``, ``decide`` to
    ``runner.policies.decide_static`` (a stand-in with the same signature serves unit tests).
    ``concurrency`` > 1 keeps that many decisions in flight (useful with a remote provider);
    the rows come out in the same canonical order either way (snapshot by snapshot: the
    arms, then ECT under each ablation). ``on_progress(done, total)`` is
    called after each decision (for progress output).

    Raises:
        FastPathInvariantBroken: the critic core called (or reported calling) its model.
        CriticCoreInvariantBroken: raised by the policy for the same reason.
    """
    from runner.providers import PriceTable

    if snapshots is None:
        from runner.worlds import static_grid

        snapshots = static_grid()
    if decide is None:
        from runner.policies import decide_static

        decide = decide_static
    gen = spec.generation.config()
    prices = PriceTable(**spec.price)
    plan: list[tuple[str, str]] = [(arm, "") for arm in arms]
    removes = {a.name: frozenset(a.removes) for a in ablations}
    plan += [("ect", a.name) for a in ablations]
    jobs = [(snapshot, arm, ablate) for snapshot in snapshots for arm, ablate in plan]
    decided: list[StaticDecision | None] = [None] * len(jobs)
    finished = [0]

    async def one(i: int) -> None:
        snapshot, arm, ablate = jobs[i]
        tripwire = _Tripwire() if arm == "critic_core" else None
        decision = await decide(
            arm,
            snapshot,
            tripwire if tripwire is not None else provider,
            ablate=removes[ablate] if ablate else frozenset(),
            generation=gen,
        )
        if tripwire is not None and (
            tripwire.calls or decision.model_calls or decision.provider_result is not None
        ):
            raise FastPathInvariantBroken(
                f"the critic core reported a model call on snapshot {snapshot.snapshot_id}; "
                "the frozen static comparison is void (run aborted)"
            )
        decided[i] = decision
        if on_progress is not None:
            finished[0] += 1
            on_progress(finished[0], len(jobs))

    if concurrency < 1:
        raise StudyError(f"concurrency must be at least 1, got {concurrency}")
    if concurrency == 1:
        for i in range(len(jobs)):
            await one(i)
    else:
        limiter = anyio.CapacityLimiter(concurrency)

        async def limited(i: int) -> None:
            async with limiter:
                await one(i)

        async with anyio.create_task_group() as tg:
            for i in range(len(jobs)):
                tg.start_soon(limited, i)

    # Rows and attempts in canonical job order, however the decisions interleaved.
    run = StaticRun()
    for (snapshot, arm, ablate), decision in zip(jobs, decided, strict=True):
        if decision is None:
            raise StudyError(f"snapshot {snapshot.snapshot_id}, arm {arm}: no decision")
        result = decision.provider_result
        cost = result.cost_usd(prices) if result is not None else 0.0
        run.rows.append(_row(snapshot, arm, ablate, decision, cost))
        if result is not None:
            for a in result.attempts:
                where = {"snapshot_id": str(snapshot.snapshot_id), "arm": arm}
                run.attempts.append({**a.stable_json(), **where})
                run.journal.append({**a.to_json(), **where})
    return run


def static_provider(
    name: str,
    spec: StaticSpec,
    *,
    model: str | None = None,
    base_url: str | None = None,
    credential_file: str | None = None,
    credential_env: str | None = None,
) -> Provider:
    """The provider for the model-backed static arms, built by :func:`runner.providers.build`
    (the one validation of provider settings) with the static spec's defaults; the simulated
    provider answers with the spec's simulated critic parameters."""
    from runner.providers import build, provider_entry

    responder = None
    if provider_entry(name).simulated:
        from runner.policies import CriticBehaviour, PlannerBehaviour, simulated_responder

        responder = simulated_responder(PlannerBehaviour(), CriticBehaviour.from_json(spec.critic))
    # the spec's [provider] keys; a provider it does not name gets the table's default model
    models = {"simulated": spec.simulated_model, "gemini": spec.gemini_model,
              "openai": spec.openai_model}
    base_urls = {"openai": spec.openai_base_url}
    return build(
        name,
        model=model or models.get(name),
        base_url=base_url or base_urls.get(name),
        credential_file=credential_file,
        credential_env=credential_env,
        timeout_s=spec.timeout_s,
        responder=responder,
    )
