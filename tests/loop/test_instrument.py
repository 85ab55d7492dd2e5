"""The closed-loop study as an instrument, over every row of the frozen schedule.

All 576 cells of ``schedules/v2.toml`` run through ``runner.study.run_cell_trajectory`` (the
code path of ``ect run`` and ``ect replay``) on the simulated provider with the spec's
parameters; every request is captured at the provider seam. The synthetic tools answer
in-process (the sandbox is a layer below and has its own tests; ``test_demo_store_*`` in
``tests/study/test_instrument_store.py`` (slow) checks the same on a real sandboxed run):

- no request shows a gold value that its own receipts do not give (drafts and proposals);
- the first planner action is the same for the four pipelines of every (task, checkpoint,
  seed) group (common random numbers);
- every cell scored supported passes the project's verifier against its final ledger;
- every ECT directive is made of reason codes and slot names only (no value).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from runner.canonical import canonical_bytes
from runner.ect import REASON_CODES, Claim, Ledger, values_match, verify_json
from runner.loop import Trajectory, score
from runner.policies import CriticBehaviour, PlannerBehaviour, simulated_responder
from runner.policies._pipelines import ECT_DIRECTIVE_FOOTER, ECT_DIRECTIVE_HEADER
from runner.policies._views import extract_view
from runner.providers import ProviderRequest, ProviderResult, SimulatedProvider
from runner.study import load_spec, read_schedule
from runner.study._cell import run_cell_trajectory
from runner.worlds import closed_loop_checkpoints, execute_calls, propose_certificate
from tests.sizes import STUDY_CELLS
from tests.worlds.test_drafts import _derivable

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "schedules" / "v2.toml"


class _Capturing:
    """The simulated provider, keeping every request it is sent (the provider seam)."""

    def __init__(self, inner: SimulatedProvider, sink: list[ProviderRequest]) -> None:
        self.inner, self.sink = inner, sink
        self.name, self.simulated, self.model = inner.name, True, inner.model

    async def generate(self, request: ProviderRequest, *, observer: Any = None) -> ProviderResult:
        self.sink.append(request)
        return await self.inner.generate(request, observer=observer)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Cell:
    row: Any
    trajectory: Trajectory
    requests: list[ProviderRequest]


@pytest.fixture(scope="module")
def cells() -> list[Cell]:
    spec = load_spec(SPEC)
    rows = read_schedule(REPO / "schedules" / "v2.schedule.jsonl")
    cps = {cp.checkpoint_id: cp for cp in closed_loop_checkpoints()}
    planner = PlannerBehaviour.from_json(spec.simulated.get("planner", {}))
    critic = CriticBehaviour.from_json(spec.simulated.get("critic", {}))
    responder = simulated_responder(planner, critic)

    async def tool(world_id: str, tool_id: str, args: Any) -> Any:
        return execute_calls(world_id, [(tool_id, dict(args))])[0].response

    async def all_cells() -> list[Cell]:
        out = []
        for row in rows:
            sink: list[ProviderRequest] = []
            provider = _Capturing(SimulatedProvider(responder), sink)
            t = await run_cell_trajectory(spec, row, cps[row.checkpoint_id], provider, tool)
            out.append(Cell(row, t, sink))
        return out

    result: list[Cell] = anyio.run(all_cells)
    assert len(result) == STUDY_CELLS
    return result


def _claims(cert: Any) -> list[Claim]:
    out = []
    for c in (cert or {}).get("claims") or []:
        try:
            out.append(Claim.from_json(c))
        except Exception:
            continue
    return out


def test_no_request_shows_a_gold_value_its_receipts_do_not_give(cells: list[Cell]) -> None:
    leaks = []
    checked = 0
    for cell in cells:
        gold = cell.trajectory.checkpoint.task.gold
        for request in cell.requests:
            text = "\n".join(p.text or "" for m in request.messages if m.role == "user"
                             for p in m.parts)
            _, view = extract_view(text)
            if "ledger" not in view:
                continue  # the self-check sees no receipts (and is not run in the closed loop)
            ledger = Ledger.from_json(view["ledger"])
            by_id = {r.receipt_id: r for r in ledger.receipts}
            contract = cell.trajectory.checkpoint.task.contract
            honest = {c.slot: c.value for c in propose_certificate(contract, ledger).claims}
            for cert in (view.get("draft"), view.get("proposal")):
                for claim in _claims(cert):
                    if claim.slot not in gold or not values_match(
                            claim.value, gold[claim.slot], tolerance=0):
                        continue
                    checked += 1
                    # What the receipts in this request give: a replay over what the claim
                    # cites, or the honest proposal over the request's ledger (a slip can cite
                    # the wrong ids for a value the ledger does give).
                    cited = [by_id[e] for e in claim.evidence if e in by_id]
                    if not (_derivable(claim, cited) or (
                            claim.slot in honest and values_match(
                                honest[claim.slot], claim.value, tolerance=0))):
                        leaks.append((cell.row.cell_id, claim.slot, claim.value))
    assert checked > 0
    assert leaks == []


def test_the_first_planner_action_is_paired_across_pipelines(cells: list[Cell]) -> None:
    first: dict[tuple[str, str, int], set[bytes]] = defaultdict(set)
    for cell in cells:
        key = (cell.row.task_id, cell.row.checkpoint, cell.row.seed_index)
        first[key].add(canonical_bytes(cell.trajectory.decisions[0].action.to_json()))
    assert len(first) == 144
    assert [k for k, actions in first.items() if len(actions) != 1] == []


def test_every_cell_scored_supported_passes_the_verifier(cells: list[Cell]) -> None:
    supported = 0
    for cell in cells:
        t = cell.trajectory
        outcome = score(t, cell.row)
        if not outcome.supported_completion:
            continue
        supported += 1
        cert = {"format": "ect.certificate/1",
                **(t.accepted.certificate_obj if t.accepted is not None else {})}
        decision = verify_json(t.checkpoint.task.contract.to_json(), t.ledger.to_json(), cert)
        assert decision.decision == "complete", (cell.row.cell_id, decision.reasons)
        for claim in _claims(cert):
            assert values_match(claim.value, t.checkpoint.task.gold[claim.slot], tolerance=0)
    assert supported > 0


_SLOT_LIST = re.compile(r"^Missing or unsupported slots: (.*)\.$")
_REASON = re.compile(r"^- ([a-z_]+\.[a-z_]+)(?: \[slot ([A-Za-z0-9_]+)\])?$")


def test_every_ect_directive_is_made_of_reason_codes_and_slot_names_only(
        cells: list[Cell]) -> None:
    """The paper's feedback: ECT's ``continue`` tells the planner the failing checks' codes and
    the slots, never a value computed from the evidence (a replayed or expected value)."""
    directives = 0
    for cell in cells:
        if cell.row.policy != "ect":
            continue
        contract = cell.trajectory.checkpoint.task.contract
        slots = set(contract.descriptor.required_slots)
        for request in cell.requests:
            if request.role != "planner":
                continue
            text = "\n".join(p.text or "" for m in request.messages if m.role == "user"
                             for p in m.parts)
            _, view = extract_view(text)
            directive = view.get("directive")
            if not directive:
                continue
            directives += 1
            lines = directive.split("\n")
            assert lines[0] == ECT_DIRECTIVE_HEADER and lines[-1] == ECT_DIRECTIVE_FOOTER
            listed = _SLOT_LIST.match(lines[1])
            assert listed is not None and lines[2] == "Reasons:", directive
            named = listed.group(1)
            assert named == "none" or set(named.split(", ")) <= slots, directive
            for line in lines[3:-1]:
                m = _REASON.match(line)
                assert m is not None, line
                assert m.group(1) in REASON_CODES, line
                assert m.group(2) is None or m.group(2) in slots, line
    assert directives > 0
