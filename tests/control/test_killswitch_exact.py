"""The kill switch's smaller contracts, pinned exactly: the default cost alert's log line, the
lease lifetime written to the ledger, the UTC day under a non-UTC local zone, the alert
boundary, usage without a ledger and the spend a finished run records."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import structlog

from runner.control import Admission, CostAlert, KillSwitch


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_the_default_cost_alert_logs_one_structured_warning() -> None:
    ks = KillSwitch(cost_alert_usd=1.0)
    with structlog.testing.capture_logs() as logs:
        ks.on_cost_alert(CostAlert("r-1", 1.5, 1.0))
    assert logs == [{"event": "run cost alert", "run_id": "r-1", "cost_usd": 1.5,
                     "threshold_usd": 1.0, "log_level": "warning"}]


def test_the_alert_fires_only_above_the_threshold() -> None:
    ks = KillSwitch(cost_alert_usd=1.0)
    assert (ks.alert_due(0.99), ks.alert_due(1.0), ks.alert_due(1.01)) == (False, False, True)
    assert KillSwitch().alert_due(10**6) is False


def lease_lifetime(ledger: Path) -> float:
    with sqlite3.connect(ledger) as con:
        (expires,) = con.execute("SELECT expires FROM leases").fetchone()
    return float(expires) - time.time()


@pytest.mark.parametrize(("kwargs", "ttl"), [({}, 3600.0), ({"lease_ttl_s": 60.0}, 60.0)])
def test_a_lease_expires_after_lease_ttl_s(tmp_path: Path, kwargs: dict[str, float],
                                           ttl: float) -> None:
    ks = KillSwitch(ledger=tmp_path / "l.sqlite", max_spend_per_day_usd=1.0,
                    step_reserve_usd=0.1, **kwargs)  # type: ignore[arg-type]
    lease, _ = ks.reserve(ks.admit(), "r")
    assert lease is not None
    assert ttl - 30 < lease_lifetime(tmp_path / "l.sqlite") <= ttl  # written just now


@pytest.fixture
def far_local_zone() -> Iterator[None]:
    """Local time ten hours behind UTC (a POSIX TZ string: no tz database needed)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TZ", "XYZ+10")
    time.tzset()
    yield
    mp.undo()
    time.tzset()


def test_the_day_is_the_utc_day_whatever_the_local_zone(far_local_zone: None) -> None:
    clock = Clock(datetime(2026, 3, 14, 23, 0, tzinfo=timezone(timedelta(hours=-5))))
    assert datetime(2026, 3, 15, 4, tzinfo=UTC).astimezone().day == 14  # the zone is in effect
    assert KillSwitch(clock=clock).admit().day == "2026-03-15"


def test_usage_without_a_ledger_and_recorded_spend(tmp_path: Path) -> None:
    assert KillSwitch().usage() == {"runs": 0, "spend_usd": 0.0, "reserved_usd": 0.0}
    clock = Clock(datetime(2026, 3, 14, 12, tzinfo=UTC))
    ks = KillSwitch(ledger=tmp_path / "l.sqlite", max_spend_per_day_usd=5.0, clock=clock)
    adm = ks.admit()
    ks.record_spend(adm, 1.25)
    ks.record_spend(Admission("2026-03-13", 1, 0.0, None), 0.5)  # on the day it was admitted
    assert ks.usage() == {"runs": 1, "spend_usd": 1.25, "reserved_usd": 0.0}
    assert ks.usage("2026-03-13") == {"runs": 0, "spend_usd": 0.5, "reserved_usd": 0.0}


def test_what_the_ceiling_leaves_is_counted_in_micro_dollars(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "l.sqlite", max_spend_per_day_usd=0.12345678912)
    assert ks.admit().remaining_usd == 0.123457


def test_the_disable_variable_is_read_from_the_process_environment_by_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ks = KillSwitch(disable_env="ECT_TEST_AGENT_OFF")
    monkeypatch.delenv("ECT_TEST_AGENT_OFF", raising=False)
    assert ks.engaged() is None
    monkeypatch.setenv("ECT_TEST_AGENT_OFF", "0")
    assert ks.engaged() is None
    monkeypatch.setenv("ECT_TEST_AGENT_OFF", "1")
    assert ks.engaged() == "kill switch engaged: $ECT_TEST_AGENT_OFF is set"


def test_a_zero_session_ceiling_is_allowed_and_halts_at_once() -> None:
    assert KillSwitch(max_cost_usd=0).halt_reason() == "cost ceiling $0 reached ($0.0000 spent)"
    assert KillSwitch(max_cost_usd=1.5, max_calls=3).halt_reason(spent_usd=1.0, calls=2) is None


def test_without_a_step_reserve_a_step_reserves_its_bound_capped_by_the_day(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "l.sqlite", max_spend_per_day_usd=1.0)
    adm = ks.admit()
    lease, allowed = ks.reserve(adm, "r", 0.3)  # what is left of the run's max_cost_usd
    assert lease is not None and (lease.amount_usd, allowed) == (0.3, 0.3)
    whole, allowed = ks.reserve(adm, "s")  # no bound: everything the day still leaves
    assert whole is not None and (whole.amount_usd, allowed) == (0.7, 0.7)
    assert ks.usage()["reserved_usd"] == 1.0
    assert ks.reserve(adm, "t", 0.1) == (None, 0.0)  # nothing left: never a zero lease
