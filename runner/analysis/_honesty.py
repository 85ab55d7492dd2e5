"""What every report must say plainly: the simulator's parameters, the project's own choices, and
gate outcomes worded so a simulated gate never reads as a finding.

With the simulated provider a gate's pass or fail follows from the simulator's parameters, which
this project chose; a report therefore names those parameters (read from what the run used, never
typed in here) and words each simulated gate as "met under the simulator's parameters", never a
bare PASSED or FAILED. Definitions the ECT paper leaves open are this project's choices; each is
listed, beside the paper's own words, in every results.json under ``"choices"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runner.analysis._record import Record

__all__ = [
    "CHOICES",
    "SIMULATOR_NOTE",
    "STATIC_SIMULATOR_NOTE",
    "Choice",
    "SimulatorBlock",
    "flat_parameters",
    "gate_text",
    "static_gate_text",
]

SIMULATOR_NOTE = (
    "The simulator's parameters were chosen by this project, not measured: with the simulated "
    "provider a gate's outcome follows from them, so it shows that the machinery works end to "
    "end, not how a real model behaves. The ect sweep command shows how the gates move with them."
)

STATIC_SIMULATOR_NOTE = (
    "The simulator's parameters were chosen by this project, not measured: they shape the "
    "self-check and full-trace critic arms, whose figures are therefore not model "
    "measurements. H1 compares ECT and the critic core, which call no model."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice(Record):
    """A definition the ECT paper leaves open, as this project fixed it."""

    key: str
    what: str
    ours: str
    paper: str
    applies_to: tuple[str, ...]


CHOICES: tuple[Choice, ...] = (
    Choice(
        key="transport_failures",
        what="a provider call that fails in transport (connection, timeout, HTTP 429 or 5xx, a "
        "body that is not the API's JSON or is truncated)",
        ours="one identical retry after any transport failure (a 429/503 Retry-After is waited "
        "out first); a transport failure that survives it produces no outcome: under "
        "on_transport_failure = \"halt\" (the default, recorded in the lock) the cell is not "
        "committed, the run halts and `ect resume` runs the cell again; \"record\" keeps it in "
        "the denominator. A well-formed reply whose content is unusable is the model's answer "
        "and stays in the denominator either way",
        paper="A single identical retry is allowed only after a pre-output transport failure; "
        "final provider and parse failures remain in the denominator",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="simulator_parameters",
        what="the simulated provider's behaviour (planner and critic probabilities)",
        ours="every probability of the simulated planner and critics was chosen by this project "
        "by two stated rules, not fitted to any table (SLIP 0.05: an action contradicting what "
        "the actor can see; COIN 0.5: a disposition nothing in the view settles), the same "
        "value for one behaviour in the study spec and the static spec; no figure computed "
        "with the simulated provider is a model measurement",
        paper="Model-path evaluation uses Gemini 2.5 Flash at temperature 0.2 (seed 2705 for "
        "the full-trace critic)",
        applies_to=("static", "closed_loop"),
    ),
    Choice(
        key="h4_gate",
        what="the H4 gate rule",
        ours="ECT's successful recovery events on incomplete checkpoints are more than zero, "
        "and a strict majority of them then complete with support",
        paper="ECT executed a successful recovery event in 18/66 eligible incomplete "
        "trajectories; 17 subsequently completed with support. The prespecified event-level "
        "H4 gate passed.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="successful_recovery",
        what='"successful recovery" (R)',
        ours="on an incomplete checkpoint, after the first rejected finish, the run executed a "
        "tool call producing a valid receipt inside a required slot's scope that the "
        "checkpoint's ledger did not already hold (a rejected finish must come first)",
        paper="R is successful recovery on incomplete checkpoints.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="f4_perturbation",
        what="the F4 (scope mismatch) fault operator",
        ours="F4 moves a cited call's dates out of the slot's scope (inside the world); it never "
        "changes the entity (F2 replaces the entity)",
        paper="F4: Entity or date scope changed",
        applies_to=("static", "closed_loop"),
    ),
    Choice(
        key="critic_core_fast_paths",
        what="the critic core's fast paths, reconstructed from the source paper's description",
        ours="a repeated last call is stuck; a finish whose required slots all carry a "
        "non-null value is complete (fast path 1); else a finish after any call that reported "
        "transport success is complete (fast path 2); only otherwise is the critic model asked",
        paper="The inspected critic core is the repository-grounded primary comparator, "
        "including its permissive completion fast paths; Critic-core fast-path decisions are "
        "reported as deterministic critic decisions, not LLM judgments.",
        applies_to=("static", "closed_loop"),
    ),
    Choice(
        key="table3_matching",
        what="which single check each Table 3 row removes",
        ours="one named check per matched fault (runner.study.TABLE3_ABLATIONS: e.g. "
        "evidence.unknown_receipt for F7, the status checks evidence.exec_error and "
        "evidence.invalid for F3)",
        paper="Prespecified single-check ablations. Residual checks and unmatched cases are "
        "retained.",
        applies_to=("static",),
    ),
    Choice(
        key="draft_certificate",
        what="the draft certificate a closed-loop checkpoint shows the planner",
        ours="every checkpoint carries the certificate the agent drafted before it (the honest "
        "one on a clean checkpoint; on an incomplete one every slot claimed with the fault's "
        "tempting receipts cited), and a draft claim's value is computed only from what the "
        "agent observed (the replay over what it cites, else over the receipts that showed a "
        "value), never from the gold answer; docs/protocol.md has the rule fault by fault",
        paper="Each task starts from both a supported clean checkpoint and a recoverably "
        "incomplete checkpoint.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="supported",
        what='"supported" (S, and every premature unsupported termination U)',
        ours="a completion is supported only if the project's verifier answers complete for "
        "the final certificate against the final ledger and every required value equals the "
        "dual-oracle gold answer; the same judge for every pipeline, whatever the pipeline "
        "itself accepted",
        paper="S is supported completion over both conditions; the primary outcome is "
        "premature unsupported termination from the incomplete checkpoint.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="unseen_fault_operators",
        what="the operators of the unseen faults U1-U3 and the trust-boundary challenge T1",
        ours="U1: a stale read of a corrected cell (superseded value, marked invalid by the "
        "adapter); U2: a duplicate read of a fetched cell; U3: a note suggesting other "
        "transform parameters (k + 1); T1: the recovery call answered twice with two "
        "different valid values (no call can settle it: needs_human)",
        paper="Twelve faults are assigned twice: the original eight, three prespecified unseen "
        "contract faults, and one separately reported trust-boundary challenge.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="fault_assignment",
        what="which closed-loop tasks carry which fault",
        ours="a fixed table (runner.worlds.fault_assignment): every fault on two tasks in "
        "different worlds and families, U3 on the two families whose transforms have a k",
        paper="Twelve faults are assigned twice.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="controller_stuck_rule",
        what="the critic core's stuck rule and the faithful controller's one-attempt recovery",
        ours="the critic core answers stuck when the last call repeats the one before it; the "
        "controller turns the first stuck into continue with a recovery directive (one "
        "attempt), and a later stuck stands",
        paper="The critic-core arm does not reproduce the enclosing controller's one-attempt "
        "stuck recovery.",
        applies_to=("static", "closed_loop"),
    ),
    Choice(
        key="weak_arms",
        what="the completion-token, self-check and heuristic arms",
        ours="completion token: complete iff the agent signalled completion; self-check: with "
        "a completion signal, one model call that sees only the task and its own answer "
        "(approved or revise); heuristic: complete iff the agent signalled completion and "
        "some call reported transport success",
        paper="Completion token, self-check, and heuristic arms diagnose common weak signals; "
        "the heuristic is not claimed source-equivalent to either inspected production "
        "fallback.",
        applies_to=("static",),
    ),
    Choice(
        key="simulated_planner_knowledge",
        what="what the simulated planner knows about the tools, and how it errs",
        ours="the simulated planner knows which calls answer each slot it cannot yet support "
        "(runner.worlds.plan_calls over the contract) and errs on them only by a slip "
        "(p_wrong_call, SLIP: the contract states each slot's scope and the prompt each tool's "
        "schema), so its gathering never explores; a real model must work this out from the "
        "prompt and the tool schemas. Its derived values are its own arithmetic, wrong with "
        "p_arithmetic_error (SLIP), and every slip is drawn for every proposal, before and "
        "after a directive: following a directive changes what it knows (reason codes, slot "
        "names), never whether it can err",
        paper="Four termination-policy pipelines use the same planner configuration, prompt, "
        "synthetic tools, checkpoint, and three seeds.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="ect_directive",
        what="what ECT's continue tells the planner",
        ours="the reason codes of the failing checks and the missing or failing slot names, "
        "nothing computed from the evidence (a reason's detail, which can carry a replayed or "
        "expected value, stays in the decision record and never reaches the planner); no "
        "richer directive is offered",
        paper="(paraphrased; the source paper's text is not stored here) ECT's continue gives the "
        "planner the reason codes and the missing slots.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="structural_outcomes",
        what="which of ECT's closed-loop figures are guaranteed rather than measured",
        ours="ECT's U and FC are 0 by construction: supported means the project's verifier "
        "says complete (and the values equal gold), and ECT stops as complete only when the "
        "same verifier says so, so no run or sweep point can show ECT a premature unsupported "
        "termination or a clean false continuation from its decision alone; the measured "
        "parts are S, R, turns, calls, tokens and cost, and the report adds one audit figure "
        "that is not circular: completions the verifier accepted whose values differ from "
        "gold",
        paper="S is supported completion over both conditions; the primary outcome is premature "
        "unsupported termination from the incomplete checkpoint.",
        applies_to=("closed_loop",),
    ),
    Choice(
        key="static_snapshot_values",
        what="the claimed values of a static snapshot whose fault changes the ledger",
        ours="under F2, F3 and F4 the honest certificate's slots, receipt ids and transforms "
        "are kept and each value is what its cited receipts now give (the closed-loop drafts' "
        "rule), so no snapshot claims a gold value its evidence does not give; "
        "docs/protocol.md says per fault how each snapshot is built",
        paper="(paraphrased; the source paper's text is not stored here) the postconditions arm is a "
        "non-deployable oracle reference; the source paper's Table 2 gives it 144/288 unsafe "
        "completions, exactly F2, F3, F4 and F7 on 36 tasks each.",
        applies_to=("static",),
    ),
    Choice(
        key="simulated_draws",
        what="how the simulated provider's draws are paired across pipelines",
        ours="common random numbers: a draw depends only on the request as a model receives "
        "it and the generation seed (never the cell id or pipeline), so the four pipelines' "
        "first planner action in a task, checkpoint and seed group is the same",
        paper="Each arm makes an independent planner call, so realized proposals may differ; "
        "the estimand is a policy pipeline under matched nominal inputs.",
        applies_to=("static", "closed_loop"),
    ),
)
"""Every definition this project chose where the paper leaves it open, with the paper's words."""


def flat_parameters(tables: Mapping[str, Mapping[str, float]], prefix: str = "simulated"
                    ) -> dict[str, float]:
    """``{"planner": {"p_x": 0.1}}`` -> ``{"simulated.planner.p_x": 0.1}`` (dotted spec names)."""
    out: dict[str, float] = {}
    for table, values in sorted(tables.items()):
        for name, value in sorted(values.items()):
            out[f"{prefix}.{table}.{name}"] = value
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatorBlock(Record):
    """results.json's ``"simulator"`` block: who chose the parameters, which, and from where."""

    chosen_by: str
    parameters: dict[str, float]
    source: str
    note: str

    @classmethod
    def of(cls, parameters: Mapping[str, float] | None, source: str,
           note: str = SIMULATOR_NOTE) -> SimulatorBlock:
        return cls(chosen_by="this project", parameters=dict(sorted((parameters or {}).items())),
                   source=source, note=note)


def gate_text(passed: bool, simulated: bool) -> str:
    """A gate's outcome in words: a simulated gate is met or not *under the parameters*."""
    if simulated:
        return ("gate met under the simulator's parameters" if passed
                else "gate not met under the simulator's parameters")
    return "PASSED" if passed else "FAILED"


def static_gate_text(passed: bool, simulated: bool) -> str:
    """H1's outcome in words. H1 compares two arms that call no model (ECT and the critic core),
    so with a simulated provider it holds on the generated snapshots whatever the simulator's
    parameters; it is still not a model measurement."""
    if simulated:
        return ("gate met on the generated snapshots (the two arms compared call no model, so "
                "no simulator parameter enters it)" if passed
                else "gate not met on the generated snapshots (the two arms compared call no "
                "model, so no simulator parameter enters it)")
    return "PASSED" if passed else "FAILED"
