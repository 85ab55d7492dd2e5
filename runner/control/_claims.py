"""The step controller's side of the idempotency ledger.

A side-effect call with an idempotency key is run at most once: a key this run already used is
deduplicated (the earlier result is the call's result); with a shared
:class:`~runner.control.IdempotencyLedger` the key is claimed before the call runs, another
attempt holding it is waited for, a key whose outcome is unknown stops the run
``needs_human``; a claim is released when the call did not happen and abandoned (outcome
unknown) when it may have.
"""

from __future__ import annotations

import contextlib
import time
import uuid

from runner.canonical import canonical_bytes
from runner.control._checks import _Checks, _left
from runner.control._ledger import NOT_STORABLE, Claim
from runner.control._types import (
    Checkpoint,
    RunState,
    StepRecord,
    Stop,
    StopReason,
    ToolCall,
    ToolResult,
)
from runner.control._verdicts import (
    ResultNotStored,
    UnknownOutcome,
    UserCodeError,
    Verdict,
    VerdictKind,
    _call,
    _Failed,
    _first_line,
)
from runner.errors import ControlError


class _Claims(_Checks):
    """Deduplication and claims of idempotency keys (see the module docstring)."""

    def _deduplicated(self, state: RunState, point: Checkpoint, call: ToolCall,
                      key: str) -> Verdict:
        earlier = state._idempotency[key][1]
        if isinstance(earlier.data, dict) and set(earlier.data) == {NOT_STORABLE}:
            stop = Stop(StopReason.NEEDS_HUMAN, ResultNotStored(key),
                        f"{call.tool} with idempotency key {key!r} already happened, but its "
                        f"result could not be stored ({earlier.data[NOT_STORABLE]})", state.step,
                        question=f"{call.tool} with key {key!r} is done and will not run again; "
                                 "what should the run use as its result?")
            return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
        self._observe(point)
        state.trace.append(StepRecord(state.step, "deduplicated", call.tool,
                                      dict(call.args), earlier,
                                      f"idempotency key {key!r} already executed",
                                      idempotency_key=call.idempotency_key))
        if self.fold is not None:  # the earlier result is this call's result
            _call("fold", self.fold, state, call, earlier)
        return Verdict(VerdictKind.DEDUPLICATED, call=call, result=earlier)

    def _claim(self, state: RunState, point: Checkpoint, call: ToolCall,
               key: str) -> Verdict | None:
        """Claim ``key`` in the shared ledger before the call runs (None: claimed, run it).

        Another attempt holding it in flight is waited for (polling, within the run's time
        budget); when it is done its result is this call's; when its outcome is unknown the
        run stops ``needs_human``."""
        ledger = self.idempotency
        if ledger is None:
            return None
        fingerprint = canonical_bytes([call.tool, call.args])
        owner = f"{state.run_id}/{uuid.uuid4().hex}"
        pause = 0.01
        while True:
            try:
                outcome, found = ledger.claim(key, fingerprint, state.run_id, owner)
            except ControlError as e:
                raise _Failed(UserCodeError("idempotency.ledger"), str(e)) from None
            if outcome == "claimed":
                state._claims[key] = owner
                return None
            if outcome == "done":
                assert isinstance(found, tuple)
                state._idempotency[key] = found
                if found[0] != fingerprint:
                    assert self.guard is not None
                    stop = self.guard._stop(StopReason.POLICY_BLOCK, point,
                                            f"idempotency key {key!r} reused with different "
                                            "arguments")
                    return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
                return self._deduplicated(state, point, call, key)
            assert isinstance(found, Claim)
            if outcome == "unknown":
                stop = Stop(StopReason.NEEDS_HUMAN, UnknownOutcome(key),
                            f"an earlier attempt of {call.tool} with idempotency key {key!r} "
                            f"({found.describe()}) ended mid-call: its outcome is unknown",
                            state.step,
                            question=f"Did {call.tool} with key {key!r} take effect? Check, "
                                     "then resolve the key in the idempotency ledger "
                                     "(resolve(key, result) if it did, resolve(key) if not) "
                                     "and resume the run.")
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
            flagged = self._flag(state)  # re-read while waiting: a STOP file ends the wait
            if flagged is not None:
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, flagged))
            left = _left(state)
            if left is not None and left <= 0 and self._time is not None:
                stop = self._time.expired(point, f"waiting for {key!r} held by "
                                                 f"{found.describe()}")
                return Verdict(VerdictKind.STOP, call=call, stop=self._end(state, stop))
            time.sleep(pause if left is None else min(pause, left))
            pause = min(pause * 1.5, 0.25)

    def _crashed(self, state: RunState, call: ToolCall, e: Exception) -> ToolResult:
        """A tool that raised is a fatal failure; if it was a side-effect call holding a claim,
        the side effect may have happened before it raised (the charge went through, then the
        reply timed out): its key becomes unknown, as when the controller's own deadline cuts a
        call off, and is never freed for a retry."""
        key = self.guard.idempotency_key(call) if self.guard is not None else None
        owner = state._claims.pop(key, None) if key is not None else None
        if key is not None and owner is not None and self.idempotency is not None:
            with contextlib.suppress(ControlError):  # unwritable: the claim stays held
                self.idempotency.abandon(key, owner)
        return ToolResult.failure(_first_line(e), fatal=True)

    def _release_claims(self, state: RunState) -> None:
        """Free every claim this run holds: its calls never ran (an async ``execute`` given to
        ``run`` returned a coroutine that was closed unawaited)."""
        ledger = self.idempotency
        for key, owner in list(state._claims.items()):
            del state._claims[key]
            if ledger is not None:
                with contextlib.suppress(ControlError):
                    ledger.release(key, owner)

    def _settle_claims(self, state: RunState) -> None:
        """A call whose claim is still held when the run ends never reported back (cancelled at
        a deadline, interrupted): its outcome is unknown."""
        ledger = self.idempotency
        for key, owner in list(state._claims.items()):
            del state._claims[key]
            if ledger is not None:
                with contextlib.suppress(ControlError):  # the run already ends; nothing to do
                    ledger.abandon(key, owner)

    def _shared_key(self, state: RunState, call: ToolCall) -> None:
        """Bring a key another run already used into this run's idempotency memory."""
        if self.idempotency is None or self.guard is None:
            return
        key = self.guard.idempotency_key(call)
        if key is None:
            return
        try:
            earlier = self.idempotency.get(key)
        except ControlError as e:
            raise _Failed(UserCodeError("idempotency.ledger"), str(e)) from None
        if earlier is not None:
            state._idempotency[key] = earlier
