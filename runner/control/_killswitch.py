"""The kill switch: a disable flag, a per-run cost alert, daily ceilings on runs and spend.

It sits outside the loop. ``admit()`` is called before every run: it refuses (raising a
:class:`RunRefused` subclass with a one-line message) when the disable flag is set or today's
(UTC) run or spend ceiling is reached, and otherwise counts the run in a small JSON ledger file.
``record_spend()`` adds the run's cost when it ends. The ledger is locked (``fcntl``) and
replaced atomically, so concurrent processes share one count.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from runner.canonical import atomic_write, canonical_bytes, load_strict_file
from runner.control._errors import (
    DailyRunCeiling,
    DailySpendCeiling,
    KillSwitchEngaged,
    LedgerError,
)
from runner.errors import FormatError

__all__ = ["KILL_SWITCH_LEDGER_FORMAT", "Admission", "CostAlert", "KillSwitch"]

KILL_SWITCH_LEDGER_FORMAT = "ect.control-ledger/1"
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
        ledger: JSON file counting runs and spend per UTC day (needed for daily ceilings).
        max_runs_per_day / max_spend_per_day_usd: daily ceilings (UTC days).
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
        cost_alert_usd: float | None = None,
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
        if cost_alert_usd is not None and not cost_alert_usd > 0:
            raise ValueError("cost_alert_usd must be > 0")
        self.disable_file = Path(disable_file) if disable_file is not None else None
        self.disable_env = disable_env
        self.ledger = Path(ledger) if ledger is not None else None
        self.max_runs_per_day = max_runs_per_day
        self.max_spend_per_day_usd = max_spend_per_day_usd
        self.cost_alert_usd = cost_alert_usd
        self.on_cost_alert = on_cost_alert or _default_alert
        self._clock = clock or _utc_now
        self._environ = environ

    # -- the flag ---------------------------------------------------------------------------
    def engaged(self) -> str | None:
        """Why the disable flag is set, or None."""
        if self.disable_file is not None and self.disable_file.exists():
            return f"kill switch engaged: {self.disable_file} exists"
        if self.disable_env is not None:
            env = self._environ if self._environ is not None else os.environ
            if env.get(self.disable_env, "") not in ("", "0"):
                return f"kill switch engaged: ${self.disable_env} is set"
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
        if self.ledger is None:
            return Admission(day, 1, 0.0, None)
        with self._locked() as book:
            today = book.setdefault(day, {"runs": 0, "spend_usd": 0.0})
            runs, spend = today["runs"], today["spend_usd"]
            if self.max_runs_per_day is not None and runs >= self.max_runs_per_day:
                raise DailyRunCeiling(
                    f"daily run ceiling reached: {runs} of {self.max_runs_per_day} runs on {day} (UTC)")
            cap = self.max_spend_per_day_usd
            if cap is not None and spend >= cap:
                raise DailySpendCeiling(
                    f"daily spend ceiling reached: ${spend:.4f} of ${cap:.4f} on {day} (UTC)")
            today["runs"] = runs + 1
        remaining = None if cap is None else round(cap - spend, 9)
        return Admission(day, runs + 1, spend, remaining)

    def record_spend(self, admission: Admission, cost_usd: float) -> None:
        """Add a finished run's cost to the ledger, on the day it was admitted."""
        if self.ledger is None or cost_usd <= 0:
            return
        with self._locked() as book:
            today = book.setdefault(admission.day, {"runs": 0, "spend_usd": 0.0})
            today["spend_usd"] = round(today["spend_usd"] + cost_usd, 9)

    def alert_due(self, cost_usd: float) -> bool:
        return self.cost_alert_usd is not None and cost_usd > self.cost_alert_usd

    def usage(self, day: str | None = None) -> dict[str, Any]:
        """``{"runs", "spend_usd"}`` for ``day`` (default today, UTC) from the ledger."""
        if self.ledger is None:
            return {"runs": 0, "spend_usd": 0.0}
        day = day or self._day()
        with self._locked(write=False) as book:
            return dict(book.get(day, {"runs": 0, "spend_usd": 0.0}))

    # -- the ledger -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self, *, write: bool = True) -> Iterator[dict[str, dict[str, Any]]]:
        assert self.ledger is not None
        path = self.ledger
        lock_path = path.with_name(path.name + ".lock")
        try:
            lock = open(lock_path, "a+b")
        except OSError as e:
            raise LedgerError(f"cannot open ledger lock {lock_path}: {e.strerror}") from e
        with lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            book = self._read(path)
            yield book
            if write:
                self._write(path, book)

    @staticmethod
    def _read(path: Path) -> dict[str, dict[str, Any]]:
        if not path.exists():
            return {}
        try:
            obj = load_strict_file(path)
        except (FormatError, OSError) as e:
            raise LedgerError(f"kill-switch ledger {path} is unreadable: {e}") from e
        if (not isinstance(obj, dict) or obj.get("format") != KILL_SWITCH_LEDGER_FORMAT
                or set(obj) != {"format", "days"} or not isinstance(obj["days"], dict)):
            raise LedgerError(f"kill-switch ledger {path} is not an {KILL_SWITCH_LEDGER_FORMAT} file")
        days: dict[str, dict[str, Any]] = {}
        for day, entry in obj["days"].items():
            ok = (
                isinstance(entry, dict) and set(entry) == {"runs", "spend_usd"}
                and isinstance(entry["runs"], int) and not isinstance(entry["runs"], bool)
                and entry["runs"] >= 0
                and isinstance(entry["spend_usd"], int | float)
                and not isinstance(entry["spend_usd"], bool) and entry["spend_usd"] >= 0
            )
            try:
                datetime.strptime(day, "%Y-%m-%d")  # noqa: DTZ007 - a calendar day, no time
            except ValueError:
                ok = False
            if not ok:
                raise LedgerError(f"kill-switch ledger {path}: bad entry for day {day!r}")
            days[day] = {"runs": entry["runs"], "spend_usd": float(entry["spend_usd"])}
        return days

    @staticmethod
    def _write(path: Path, book: dict[str, dict[str, Any]]) -> None:
        payload = canonical_bytes({"format": KILL_SWITCH_LEDGER_FORMAT, "days": book})
        try:
            atomic_write(path, payload + b"\n")
        except OSError as e:
            raise LedgerError(f"cannot write kill-switch ledger {path}: {e.strerror}") from e
