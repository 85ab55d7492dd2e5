"""The four closed-loop termination pipelines (docs/protocol.md, part 2); the pipeline table
(runner/policies/_registry.py) names each one's class here.

A pipeline is asked only when the planner proposes to finish: ``await pipeline.on_finish(state,
action)`` returns one :class:`PipelineDecision`. Pipelines are cheap and keep per-cell state
(the controller remembers its one recovery attempt), so the trajectory engine creates a fresh
one per cell with :func:`make_pipeline`.

- ``critic_core``: a repeated last call -> stuck; fast path 1 (every required slot has a claim
  with a non-null value) -> complete; fast path 2 (some call reported transport success) ->
  complete; otherwise its LLM critic (prompt ``critic_core.txt``, sees the proposal, the
  receipts and the last step): accept -> complete, reject -> continue with the critic's reason
  as directive, stuck -> stuck.
- ``controller``: the critic core inside the faithful controller: the first ``stuck`` becomes
  ``continue`` with a recovery directive (one attempt); a later ``stuck`` stands.
- ``full_trace``: always the LLM critic over the whole trace (prompt ``full_trace_critic.txt``);
  accept -> complete, reject -> continue (the critic's reason is the directive), stuck -> stuck.
- ``ect``: :func:`runner.ect.verify_json` on the trusted contract, the ledger and the raw
  proposal; complete iff it says complete; ``evidence.conflicting_receipts`` -> needs_human;
  a repeated last call with no call budget left -> stuck (the recovery-availability rule);
  otherwise continue, with the reason codes and the missing slots as the directive (never a
  reason's detail, which can carry a replayed value).

Every provider failure or unparseable verdict maps to ``continue`` (no directive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from runner.canonical import JsonRecord, spec
from runner.ect import Contract, Ledger, Reason, verify_json
from runner.policies._actions import CellIdentity, FinishAction
from runner.policies._common import last_call_repeats, reason
from runner.policies._critics import CriticVerdict, build_critic_request, parse_critic_verdict
from runner.policies._registry import PIPELINES, pipeline_entry
from runner.policies._static import critic_core_fast_path
from runner.providers import AttemptObserver, GenerationConfig, Provider, ProviderResult

__all__ = [
    "ECT_DIRECTIVE_FOOTER",
    "ECT_DIRECTIVE_HEADER",
    "PIPELINES",
    "PIPELINE_VERDICTS",
    "STUCK_RECOVERY_DIRECTIVE",
    "Pipeline",
    "PipelineDecision",
    "PipelineParams",
    "PipelineState",
    "ect_directive",
    "make_pipeline",
]

PipelineVerdict = Literal["complete", "continue", "stuck", "needs_human"]
PIPELINE_VERDICTS: tuple[PipelineVerdict, ...] = get_args(PipelineVerdict)
"""Every decision a pipeline can return, in :data:`PipelineVerdict`'s order."""

STUCK_RECOVERY_DIRECTIVE = (
    "The controller judged the run stuck: the last tool call repeats an earlier one. "
    "You get one recovery attempt: make a different tool call that obtains the evidence still "
    "missing, then finish."
)


@dataclass(frozen=True)
class PipelineState:
    """What a pipeline may look at when the planner proposes to finish.

    ``trace`` items are ``runner.worlds.ToolCall``. The budget fields count what the trajectory
    has used so far (this finish included in ``decisions_used``).
    """

    contract: Contract
    trace: tuple[Any, ...]
    ledger: Ledger
    decisions_used: int = 0
    calls_used: int = 0
    decisions_budget: int = 4
    calls_budget: int = 3

    @property
    def recovery_available(self) -> bool:
        """A recovery call is still possible: a call and a later decision remain in budget."""
        return self.calls_used < self.calls_budget and self.decisions_used < self.decisions_budget


@dataclass(frozen=True)
class PipelineDecision(JsonRecord):
    """A pipeline's answer to one finish."""

    decision: PipelineVerdict
    reasons: tuple[Reason, ...]
    directive: str | None
    model_calls: int
    # audited separately by the caller: not part of the (deterministic) JSON
    provider_results: tuple[ProviderResult, ...] = field(default=(), metadata=spec(skip=True))

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)


@dataclass(frozen=True)
class PipelineParams:
    """Per-cell settings: the critics' generation config, the cell the requests belong to (its
    id and seed, never labels; it writes each request's metadata) and an attempt observer
    handed to every critic call (a caller's hook to see the pipeline's own model calls). The
    study sets none: it journals through the provider it hands the pipeline, which passes an
    observer set here through to the call (docs/providers.md)."""

    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(temperature=0.2, seed=0, max_output_tokens=1024)
    )
    cell: CellIdentity | None = None
    observer: AttemptObserver | None = None


class Pipeline(Protocol):
    name: str

    async def on_finish(self, state: PipelineState, action: FinishAction) -> PipelineDecision: ...


def _from_verdict(
    verdict: CriticVerdict | None, result: ProviderResult
) -> PipelineDecision:
    if not result.ok:
        return PipelineDecision("continue", (reason("critic.provider_failure"),), None, 1, (result,))
    if verdict is None:
        return PipelineDecision("continue", (reason("critic.unparseable"),), None, 1, (result,))
    r = reason(f"critic.{verdict.verdict}", verdict.reason)
    if verdict.verdict == "accept":
        return PipelineDecision("complete", (r,), None, 1, (result,))
    if verdict.verdict == "stuck":
        return PipelineDecision("stuck", (r,), None, 1, (result,))
    directive = f"The critic rejected your finish: {verdict.reason or 'no reason given'}"
    return PipelineDecision("continue", (r,), directive, 1, (result,))


class _CriticBacked:
    def __init__(self, provider: Provider, params: PipelineParams) -> None:
        self._provider = provider
        self._params = params

    async def _ask(self, kind: str, state: PipelineState,
                   action: FinishAction) -> PipelineDecision:
        request = build_critic_request(
            kind,
            contract=state.contract,
            trace=state.trace,
            ledger=state.ledger,
            proposal=action.certificate_obj,
            finish_requested=True,
            generation=self._params.generation,
            metadata=(self._params.cell.metadata(critic=kind) if self._params.cell is not None
                      else {"critic": kind}),
            decision=state.decisions_used,
        )
        result = await self._provider.generate(request, observer=self._params.observer)
        return _from_verdict(parse_critic_verdict(result), result)


class CriticCorePipeline(_CriticBacked):
    name = "critic_core"

    async def on_finish(self, state: PipelineState, action: FinishAction) -> PipelineDecision:
        if last_call_repeats(state.trace):
            return PipelineDecision("stuck", (reason("policy.repeated_call"),), None, 0)
        fast = critic_core_fast_path(
            state.contract.descriptor.required_slots, state.trace, action.certificate_obj
        )
        if fast is not None:
            return PipelineDecision(fast[0], (fast[1],), None, 0)
        return await self._ask("critic_core", state, action)


class ControllerPipeline:
    """The critic core inside the faithful controller (one stuck-recovery attempt)."""

    name = "controller"

    def __init__(self, provider: Provider, params: PipelineParams) -> None:
        self._core = CriticCorePipeline(provider, params)
        self._recovery_used = False

    async def on_finish(self, state: PipelineState, action: FinishAction) -> PipelineDecision:
        d = await self._core.on_finish(state, action)
        if d.decision != "stuck" or self._recovery_used:
            return d
        self._recovery_used = True
        return PipelineDecision(
            "continue",
            (*d.reasons, reason("controller.stuck_recovery")),
            STUCK_RECOVERY_DIRECTIVE,
            d.model_calls,
            d.provider_results,
        )


class FullTracePipeline(_CriticBacked):
    name = "full_trace"

    async def on_finish(self, state: PipelineState, action: FinishAction) -> PipelineDecision:
        return await self._ask("full_trace", state, action)


ECT_DIRECTIVE_HEADER = (
    "The ECT verifier returned continue: the certificate does not yet support completion."
)
ECT_DIRECTIVE_FOOTER = (
    "Obtain successful, in-scope evidence for these slots if it is missing, then finish again "
    "citing only recorded receipts, with a permitted transform and the value it replays to."
)


def ect_directive(reasons: tuple[Reason, ...], missing_slots: tuple[str, ...]) -> str:
    """The directive ECT's ``continue`` gives the planner: reason codes and slot names only.

    As the paper has it: the codes of the failing checks and the missing or failing slots,
    nothing computed from the evidence (a reason's ``detail`` can carry a replayed or expected
    value, so it is never forwarded; the decision record keeps it for the audit). Each
    ``(code, slot)`` pair appears once, in the verifier's order.
    """
    pairs: list[tuple[str, str | None]] = []
    for r in reasons:
        if (r.code, r.slot) not in pairs:
            pairs.append((r.code, r.slot))
    lines = [
        ECT_DIRECTIVE_HEADER,
        f"Missing or unsupported slots: {', '.join(missing_slots) if missing_slots else 'none'}.",
        "Reasons:",
    ]
    lines += [f"- {code}" + (f" [slot {slot}]" if slot else "") for code, slot in pairs[:12]]
    if len(pairs) > 12:
        lines.append(f"- ... and {len(pairs) - 12} more")
    lines.append(ECT_DIRECTIVE_FOOTER)
    return "\n".join(lines)


class EctPipeline:
    name = "ect"

    def __init__(self, provider: Provider | None, params: PipelineParams) -> None:
        del provider, params  # the verifier is deterministic and calls no model

    async def on_finish(self, state: PipelineState, action: FinishAction) -> PipelineDecision:
        dec = verify_json(state.contract.to_json(), state.ledger.to_json(), action.certificate_obj)
        if dec.complete:
            return PipelineDecision("complete", (), None, 0)
        reasons = tuple(dec.reasons)
        if any(r.code == "evidence.conflicting_receipts" for r in reasons):
            return PipelineDecision("needs_human", (*reasons, reason("ect.needs_human")), None, 0)
        if last_call_repeats(state.trace) and not state.recovery_available:
            return PipelineDecision("stuck", (*reasons, reason("policy.no_recovery")), None, 0)
        return PipelineDecision(
            "continue", reasons, ect_directive(reasons, tuple(dec.missing_slots)), 0
        )


def make_pipeline(
    name: str, provider: Provider | None, params: PipelineParams | None = None
) -> Pipeline:
    """A fresh pipeline ``name`` (a key of :data:`PIPELINES`) for one cell, built by its entry's
    factory.

    Raises:
        UnknownPolicy: ``name`` is not a pipeline.
        TypeError: a model-backed pipeline (one whose entry names a critic) without a provider.
    """
    entry = pipeline_entry(name)
    if entry.critic is not None and provider is None:
        raise TypeError(f"pipeline {name!r} needs a provider")
    return entry.load()(provider, params or PipelineParams())
