"""The kill switch: a disable flag, a per-run cost alert, daily ceilings on runs and spend.

It sits outside the loop and is consulted at every step, not only when a run starts.
``admit()`` is called before a run: it refuses (raising a :class:`RunRefused` subclass with a
one-line message) when the disable flag is set or today's (UTC) run or spend ceiling is reached,
and otherwise counts the run. Before every later step the controller asks again: a flag raised
mid-run ends the run ``policy_block`` (condition ``KillSwitchStop``), and under a daily spend
ceiling each step first reserves spend (a lease of ``step_reserve_usd``, or a bound derived
from the run's budget; never zero) and settles what it really spent afterwards, so concurrent runs cannot overshoot the ceiling. The ledger is a
SQLite file (:class:`runner.control._ledger.SpendLedger`) shared safely by threads and processes.

A caller that runs many runs in one session (the study, one run per cell) asks
:meth:`KillSwitch.halt_reason` before starting each: the same disable flag, then the session's
own spend and call ceilings (``max_cost_usd``, ``max_calls``, counted by the caller).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from runner.control._errors import (
    DailyRunCeiling,
    DailySpendCeiling,
    KillSwitchEngaged,
)
from runner.control._ledger import KILL_SWITCH_LEDGER_FORMAT, Lease, SpendLedger, _Refused
from runner.control._types import dollars, micro

__all__ = ["KILL_SWITCH_LEDGER_FORMAT", "Admission", "CostAlert", "KillSwitch"]

_log = structlog.get_logger("runner.control")


@dataclass(frozen=True)
class CostAlert:
    """Sent once per run when its cost first exceeds the alert threshold."""

    run_id: str
    cost_usd: float
    threshold_usd: float


@dataclass(frozen=True)
class Admission:
    """A run let through by the kill switch: today's counts including this run."""

    day: str  # UTC, YYYY-MM-DD
    runs_today: int
    spend_today_usd: float
    remaining_usd: float | None  # what the daily spend ceiling leaves (None: no ceiling)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _default_alert(alert: CostAlert) -> None:
    _log.warning("run cost alert", run_id=alert.run_id, cost_usd=alert.cost_usd,
                 threshold_usd=alert.threshold_usd)


class KillSwitch:
    """Checked before every run; every name is given explicitly (nothing is guessed).

    Args:
        disable_file: when this path exists, every run is refused (``touch STOP``).
        disable_env: name of an environment variable; set to anything but "" or "0", every
            run is refused.
        ledger: SQLite file counting runs, spend and open leases per UTC day (needed for
            daily ceilings); shared safely by every thread and process using it.
        max_runs_per_day / max_spend_per_day_usd: daily ceilings (UTC days).
        step_reserve_usd: under a spend ceiling, what each step reserves before it runs (an
            upper bound of one step's cost). Without it a step reserves what its run may still
            spend (what is left of the budget's ``max_cost_usd``, else all the day leaves),
            capped at what the day leaves: never zero, so the ceiling stays hard, but
            concurrent runs then wait their turn for the day's money (they are refused).
        lease_ttl_s: a lease left by a crashed process stops counting after this long.
        max_cost_usd / max_calls: a session's ceilings on what its caller has spent and how many
            model calls it has made, checked by :meth:`halt_reason` (no ledger, no day).
        flag_message: the reason given when ``disable_file`` exists (``{file}`` is its path).
        calls_unit: what :meth:`halt_reason` calls the calls it counts.
        cost_alert_usd: per-run cost at which ``on_cost_alert`` fires (once per run).
        on_cost_alert: callback; default logs a structured warning.
        clock / environ: injectable for tests; default UTC now and ``os.environ``.
    """

    def __init__(
        self,
        *,
        disable_file: str | os.PathLike[str] | None = None,
        disable_env: str | None = None,
        ledger: str | os.PathLike[str] | None = None,
        max_runs_per_day: int | None = None,
        max_spend_per_day_usd: float | None = None,
        max_cost_usd: float | None = None,
        max_calls: int | None = None,
        flag_message: str = "kill switch engaged: {file} exists",
        calls_unit: str = "calls",
        cost_alert_usd: float | None = None,
        step_reserve_usd: float | None = None,
        lease_ttl_s: float = 3600.0,
        on_cost_alert: Callable[[CostAlert], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if (max_runs_per_day is not None or max_spend_per_day_usd is not None) and ledger is None:
            raise ValueError("daily ceilings need a ledger file (ledger=...)")
        if max_runs_per_day is not None and max_runs_per_day < 0:
            raise ValueError("max_runs_per_day must be >= 0")
        if max_spend_per_day_usd is not None and max_spend_per_day_usd < 0:
            raise ValueError("max_spend_per_day_usd must be >= 0")
        if max_cost_usd is not None and not max_cost_usd >= 0:
            raise ValueError("max_cost_usd must be >= 0")
        if max_calls is not None and max_calls < 0:
            raise ValueError("max_calls must be >= 0")
        if cost_alert_usd is not None and not cost_alert_usd > 0:
            raise ValueError("cost_alert_usd must be > 0")
        if step_reserve_usd is not None and (max_spend_per_day_usd is None
                                             or not step_reserve_usd > 0):
            raise ValueError("step_reserve_usd must be > 0 and needs max_spend_per_day_usd")
        if not lease_ttl_s > 0:
            raise ValueError("lease_ttl_s must be > 0")
        self.disable_file = Path(disable_file) if disable_file is not None else None
        self.disable_env = disable_env
        self.ledger = Path(ledger) if ledger is not None else None
        self.max_runs_per_day = max_runs_per_day
        self.max_spend_per_day_usd = max_spend_per_day_usd
        self.max_cost_usd = max_cost_usd
        self.max_calls = max_calls
        self.flag_message = flag_message
        self.calls_unit = calls_unit
        self.cost_alert_usd = cost_alert_usd
        self.step_reserve_usd = step_reserve_usd
        self._book = SpendLedger(self.ledger, lease_ttl_s=lease_ttl_s) if self.ledger else None
        self.on_cost_alert = on_cost_alert or _default_alert
        self._clock = clock or _utc_now
        self._environ = environ

    # -- the flag ---------------------------------------------------------------------------
    def engaged(self) -> str | None:
        """Why the disable flag is set, or None."""
        if self.disable_file is not None and self.disable_file.exists():
            return self.flag_message.format(file=self.disable_file)
        if self.disable_env is not None:
            env = self._environ if self._environ is not None else os.environ
            if env.get(self.disable_env, "") not in ("", "0"):
                return f"kill switch engaged: ${self.disable_env} is set"
        return None

    def halt_reason(self, *, spent_usd: float = 0.0, calls: int = 0) -> str | None:
        """Why a session should start no further run, or None: the disable flag, else the
        session's spend ceiling (``spent_usd`` reached it), else its call ceiling."""
        why = self.engaged()
        if why is not None:
            return why
        if self.max_cost_usd is not None and spent_usd >= self.max_cost_usd:
            return f"cost ceiling ${self.max_cost_usd:g} reached (${spent_usd:.4f} spent)"
        if self.max_calls is not None and calls >= self.max_calls:
            return f"call ceiling {self.max_calls} reached ({calls} {self.calls_unit})"
        return None

    def _day(self) -> str:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the kill switch clock must return an aware (UTC) datetime")
        return now.astimezone(UTC).date().isoformat()

    # -- admission --------------------------------------------------------------------------
    def admit(self) -> Admission:
        """Refuse or count one run.

        Raises:
            KillSwitchEngaged, DailyRunCeiling, DailySpendCeiling: the run must not start.
            LedgerError: the ledger cannot be read or written (fail closed).
        """
        why = self.engaged()
        if why is not None:
            raise KillSwitchEngaged(why)
        day = self._day()
        if self._book is None:
            return Admission(day, 1, 0.0, None)
        cap = self.max_spend_per_day_usd
        try:
            runs, spend, reserved = self._book.admit(day, self.max_runs_per_day, cap)
        except _Refused as r:
            if r.kind == "runs":
                raise DailyRunCeiling(f"daily run ceiling reached: {r.runs} of "
                                      f"{self.max_runs_per_day} runs on {day} (UTC)") from None
            assert cap is not None
            raise DailySpendCeiling(f"daily spend ceiling reached: ${r.spend_usd:.4f} of "
                                    f"${cap:.4f} on {day} (UTC)") from None
        remaining = None if cap is None else dollars(micro(cap) - micro(spend) - micro(reserved))
        return Admission(day, runs + 1, spend, remaining)

    def reserve(self, admission: Admission, run_id: str,
                bound_usd: float | None = None) -> tuple[Lease | None, float | None]:
        """Reserve one step's spend under today's ceiling: ``step_reserve_usd`` when set (refused
        unless the day can cover all of it), else ``bound_usd`` (what the run may still spend,
        e.g. what is left of its ``max_cost_usd``), else everything the day leaves — capped at
        what the day leaves. A reservation is never zero.

        Returns (the lease, what this step may spend), or (None, what the day leaves) when the
        ceiling cannot cover the reservation; (None, None) when there is no spend ceiling."""
        cap = self.max_spend_per_day_usd
        if self._book is None or cap is None:
            return None, None
        fixed = self.step_reserve_usd
        lease, left = self._book.reserve(admission.day, run_id,
                                         fixed if fixed is not None else bound_usd, cap,
                                         up_to=fixed is None)
        if lease is None:
            return None, left
        return lease, lease.amount_usd

    def settle(self, admission: Admission, lease: Lease | None, spent_usd: float) -> None:
        """Release a step's lease and add what it really spent (on the run's admission day)."""
        if self._book is not None:
            self._book.settle(lease, admission.day, spent_usd)

    def record_spend(self, admission: Admission, cost_usd: float) -> None:
        """Add a finished run's cost to the ledger, on the day it was admitted."""
        self.settle(admission, None, cost_usd)

    def alert_due(self, cost_usd: float) -> bool:
        return self.cost_alert_usd is not None and cost_usd > self.cost_alert_usd

    def usage(self, day: str | None = None) -> dict[str, Any]:
        """``{"runs", "spend_usd", "reserved_usd"}`` for ``day`` (default today, UTC)."""
        if self._book is None:
            return {"runs": 0, "spend_usd": 0.0, "reserved_usd": 0.0}
        return self._book.usage(day or self._day())
