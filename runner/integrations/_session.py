"""One agent run checked against one contract: receipts in, a sealed certificate, a decision out.

Every adapter (Inspect, OpenAI Agents SDK, LangGraph, runner.control) is a thin layer over
:class:`EctSession`: the framework reports tool events, the session turns them into a ledger,
and when the agent submits, the session seals the submission into a certificate bound to this
contract and this ledger and verifies it. The agent never writes a digest: a submission is
``{"claims": [...]}`` (or a bare list of claims); the session fills in ``format``, ``task_id``,
``descriptor_digest`` and ``ledger_digest`` from the trusted side. A *full* certificate (one
that carries ``format``) is verified exactly as given, so a certificate carried over from
another run fails its binding checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from runner.canonical import loads_strict
from runner.ect import (
    CERTIFICATE_FORMAT,
    Contract,
    Decision,
    Ledger,
    Reason,
    Receipt,
    descriptor_digest,
    ledger_digest,
    verify_json,
)
from runner.errors import FormatError
from runner.integrations._receipts import (
    Extractor,
    ToolEvent,
    _scope_ok,
    build_receipt,
    parse_result,
)

__all__ = ["EctSession", "directive_text"]


def directive_text(decision: Decision, *, max_reasons: int = 8) -> str:
    """The feedback an agent gets after a ``continue``: what is missing and why, one line each."""
    if decision.complete:
        return "Certificate verified: complete."
    lines = ["Not complete: the certificate does not verify."]
    if decision.missing_slots:
        lines.append("Missing or failing slots: " + ", ".join(decision.missing_slots) + ".")
    for r in decision.reasons[:max_reasons]:
        lines.append(f"- {r.code} [{r.slot or '-'}]: {r.detail}")
    if len(decision.reasons) > max_reasons:
        lines.append(f"- ... and {len(decision.reasons) - max_reasons} more")
    lines.append(
        "Call the tools for the evidence still missing, then submit claims that cite the "
        "receipt ids of this run."
    )
    return "\n".join(lines)


class EctSession:
    """The trusted side of one run: the contract, the receipts recorded so far, the last check.

    Args:
        contract: the trusted contract (a :class:`runner.ect.Contract` or its JSON).
        extract: says which values a tool result holds (see
            :func:`runner.integrations.scoped_value`).
        submit_tool: the name of the submit tool, whose calls are never evidence.
    """

    def __init__(
        self,
        contract: Contract | Mapping[str, Any],
        extract: Extractor,
        *,
        submit_tool: str = "submit",
    ) -> None:
        self.contract = contract if isinstance(contract, Contract) else Contract.from_json(contract)
        self.extract = extract
        self.submit_tool = submit_tool
        self.receipts: list[Receipt] = []
        self.skipped: list[str] = []  # why a tool event gave no receipt (for the record)
        self.last_decision: Decision | None = None
        self.last_certificate: dict[str, Any] | None = None

    @property
    def task_id(self) -> str:
        return self.contract.task_id

    # --- evidence ---------------------------------------------------------------------------

    def record(self, event: ToolEvent) -> tuple[Receipt, ...]:
        """Turn one executed tool call into receipts (none for the submit tool, for a result
        that is not JSON, or for what the extractor does not claim)."""
        if event.tool == self.submit_tool:
            return ()
        ok_json, result = parse_result(event.result)
        failed = event.error is not None
        if not failed and not ok_json:
            self.skipped.append(f"{event.tool} {event.call_id}: result is not JSON")
            return ()
        try:
            items = list(self.extract(event))
        except Exception as e:  # an extractor bug records nothing rather than breaking the run
            self.skipped.append(f"{event.tool} {event.call_id}: extractor raised {type(e).__name__}")
            return ()
        out = []
        for ev in items:
            if not _scope_ok(ev.scope):
                self.skipped.append(f"{event.tool} {event.call_id}: malformed scope")
                continue
            rid = f"r-{len(self.receipts) + 1:04d}"
            try:
                receipt = build_receipt(
                    self.task_id, rid, event.call_id, event.tool, event.args,
                    result if not failed else {"error": event.error},
                    path=ev.path, scope=ev.scope, ok=not failed, valid=ev.valid,
                )  # fmt: skip
            except FormatError as e:
                self.skipped.append(f"{event.tool} {event.call_id}: {e}")
                continue
            self.receipts.append(receipt)
            out.append(receipt)
        return tuple(out)

    def record_all(self, events: Iterable[ToolEvent]) -> None:
        for event in events:
            self.record(event)

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.task_id, tuple(self.receipts))

    # --- certificate ------------------------------------------------------------------------

    def seal(self, claims: Sequence[Any]) -> dict[str, Any]:
        """A certificate for ``claims`` bound to this contract and the ledger as it is now."""
        return {
            "format": CERTIFICATE_FORMAT,
            "task_id": self.task_id,
            "descriptor_digest": descriptor_digest(self.contract.descriptor),
            "ledger_digest": ledger_digest(self.ledger),
            "claims": list(claims),
        }

    def certificate(self, submission: Any) -> dict[str, Any] | Reason:
        """The certificate a submission stands for, or the reason it stands for none."""
        if isinstance(submission, str | bytes):
            try:
                submission = loads_strict(submission)
            except FormatError as e:
                return Reason("adapter.malformed_json", None, f"certificate: {e}"[:300])
        if isinstance(submission, list):
            return self.seal(submission)
        if isinstance(submission, Mapping):
            if "format" in submission:
                return dict(submission)  # a full certificate: verified exactly as given
            if set(submission) == {"claims"} and isinstance(submission["claims"], list):
                return self.seal(submission["claims"])
        return Reason(
            "adapter.malformed_certificate",
            None,
            'certificate: expected {"claims": [...]}, a list of claims or a full certificate',
        )

    def check(self, submission: Any) -> Decision:
        """Seal (when needed) and verify a submission against this contract and ledger.

        Never raises: malformed input is a ``continue`` with an ``adapter.*`` reason.
        """
        cert = self.certificate(submission)
        if isinstance(cert, Reason):
            decision = Decision("continue", (cert,), self.contract.descriptor.required_slots)
            self.last_certificate = None
        else:
            decision = verify_json(self.contract.to_json(), self.ledger.to_json(), cert)
            self.last_certificate = cert
        self.last_decision = decision
        return decision

    def unsubmitted(self) -> Decision:
        """The decision for a run that ended without any submission: every slot missing."""
        return self.check([])
