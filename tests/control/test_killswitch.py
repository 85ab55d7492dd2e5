"""Kill switch: the disable flag (a STOP file, read mid-run and while waiting for a claim), daily
ceilings in a UTC ledger, per-run cost alerts, leases."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import structlog

from runner.control import (
    KILL_SWITCH_LEDGER_FORMAT,
    Admission,
    Budget,
    CostAlert,
    DailyRunCeiling,
    DailySpendCeiling,
    Finish,
    IdempotencyLedger,
    KillSwitch,
    KillSwitchEngaged,
    LedgerError,
    RunController,
    RunState,
    StopReason,
    ToolCall,
    ToolResult,
    Turn,
)
from runner.errors import ControlError
from tests.control.conftest import script, tools
from tests.control.helpers_pay_processes import (
    _PAYER,
    _STOPPABLE,
    PAY,
    _child,
    _fold,
    _payer,
    _until,
)
from tests.control.helpers_runs import ok


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def controller(ks: KillSwitch) -> RunController:
    return RunController(Budget(max_steps=5, max_tokens=1000), validate=lambda s, o: True,
                         kill_switch=ks)


def one_run(c: RunController, cost: float = 0.0) -> object:
    return c.run("t", script(Turn(Finish("ok"), tokens=1, cost_usd=cost)), tools({}))


def test_disable_file_refuses_every_run(tmp_path: Path) -> None:
    stop = tmp_path / "STOP"
    c = controller(KillSwitch(disable_file=stop))
    assert one_run(c).reason is StopReason.GOAL_MET  # type: ignore[attr-defined]
    stop.touch()
    with pytest.raises(KillSwitchEngaged) as e:
        one_run(c)
    assert str(e.value) == f"kill switch engaged: {stop} exists" and "\n" not in str(e.value)
    assert isinstance(e.value, ControlError)
    stop.unlink()
    assert one_run(c).reason is StopReason.GOAL_MET  # type: ignore[attr-defined]


def test_disable_env_variable_named_explicitly() -> None:
    env: dict[str, str] = {}
    c = controller(KillSwitch(disable_env="AGENT_OFF", environ=env))
    one_run(c)
    env["AGENT_OFF"] = "0"
    one_run(c)  # "0" and "" mean not set
    env["AGENT_OFF"] = "1"
    with pytest.raises(KillSwitchEngaged, match=r"\$AGENT_OFF is set"):
        one_run(c)


def test_step_api_checks_the_switch_at_start(tmp_path: Path) -> None:
    (tmp_path / "STOP").touch()
    c = controller(KillSwitch(disable_file=tmp_path / "STOP"))
    with pytest.raises(KillSwitchEngaged):
        c.start("t")


def test_daily_run_ceiling_with_utc_day_rollover(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 14, 23, 59, tzinfo=UTC))
    ledger = tmp_path / "ledger.sqlite"
    ks = KillSwitch(ledger=ledger, max_runs_per_day=2, clock=clock)
    c = controller(ks)
    one_run(c)
    one_run(c)
    with pytest.raises(DailyRunCeiling, match=r"2 of 2 runs on 2026-03-14 \(UTC\)"):
        one_run(c)
    # a refused run is not counted
    assert ks.usage("2026-03-14")["runs"] == 2
    # local midnight elsewhere does not matter: the day is UTC
    clock.now = datetime(2026, 3, 15, 0, 30, tzinfo=timezone(timedelta(hours=5)))  # 19:30 UTC 14th
    with pytest.raises(DailyRunCeiling):
        one_run(c)
    clock.now = datetime(2026, 3, 15, 0, 1, tzinfo=UTC)
    one_run(c)
    assert ks.usage("2026-03-14") == {"runs": 2, "spend_usd": 0.0, "reserved_usd": 0.0}
    assert ks.usage("2026-03-15") == {"runs": 1, "spend_usd": 0.0, "reserved_usd": 0.0}
    with sqlite3.connect(ledger) as con:  # a real SQLite file, tagged with its format
        assert con.execute("SELECT value FROM meta WHERE key='format'").fetchone() == (
            KILL_SWITCH_LEDGER_FORMAT,)


def test_ceiling_is_shared_by_switch_instances_on_one_ledger(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 14, 12, tzinfo=UTC))
    a = KillSwitch(ledger=tmp_path / "l.json", max_runs_per_day=3, clock=clock)
    b = KillSwitch(ledger=tmp_path / "l.json", max_runs_per_day=3, clock=clock)
    a.admit()
    b.admit()
    a.admit()
    with pytest.raises(DailyRunCeiling):
        b.admit()


def test_daily_spend_ceiling_refuses_and_bounds_the_run(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 14, 12, tzinfo=UTC))
    ks = KillSwitch(ledger=tmp_path / "l.json", max_spend_per_day_usd=1.0, clock=clock)
    c = RunController(Budget(max_steps=50, max_cost_usd=10.0), validate=lambda s, o: True,
                      kill_switch=ks)
    costly = [Turn(ToolCall("a", {"i": i}), cost_usd=0.3) for i in range(50)]
    res = c.run("t", script(*costly), tools({"a": ToolResult.success({"x": 1})}))
    # the run's own ceiling is $10, but only $1 is left today: that is what bounds it
    assert res.reason is StopReason.TOKEN_BUDGET
    assert type(res.stop.condition).__name__ == "DailySpendCap"
    assert res.cost_usd == pytest.approx(1.2)
    assert ks.usage()["spend_usd"] == pytest.approx(1.2)
    with pytest.raises(DailySpendCeiling, match=r"\$1.2000 of \$1.0000 on 2026-03-14"):
        one_run(c)


def test_cost_alert_fires_once_per_run() -> None:
    alerts: list[CostAlert] = []
    ks = KillSwitch(cost_alert_usd=0.05, on_cost_alert=alerts.append)
    c = RunController(Budget(max_steps=9, max_cost_usd=1.0), validate=lambda s, o: True,
                      kill_switch=ks)
    turns = [Turn(ToolCall("a", {"i": i}), cost_usd=0.02) for i in range(6)] + [Finish("x")]
    res = c.run("t", script(*turns), tools({"a": ToolResult.success({"x": 1})}), run_id="r-7")
    assert res.reason is StopReason.GOAL_MET
    assert alerts == [CostAlert("r-7", 0.06, 0.05)]
    c.run("t", script(Finish("x")), tools({}))
    assert len(alerts) == 1  # a cheap run raises no alert


def test_corrupt_ledger_fails_closed(tmp_path: Path) -> None:
    ledger = tmp_path / "l.json"
    ks = KillSwitch(ledger=ledger, max_runs_per_day=5,
                    clock=Clock(datetime(2026, 3, 14, tzinfo=UTC)))
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('format', 'something-else/1')")
    for bad in (b"{not json", b'{"format": "ect.control-ledger/1", "days": {}}',
                b"SQLite format 3\x00" + b"\xff" * 200, other.read_bytes()):
        ledger.write_bytes(bad)
        with pytest.raises(LedgerError) as e:
            ks.admit()
        assert "\n" not in str(e.value)


def test_configuration_errors() -> None:
    with pytest.raises(ValueError):
        KillSwitch(max_runs_per_day=3)  # a ceiling needs a ledger
    with pytest.raises(ValueError):
        KillSwitch(cost_alert_usd=0)
    with pytest.raises(ValueError):
        KillSwitch(clock=lambda: datetime(2026, 1, 1)).admit()  # noqa: DTZ001 - naive on purpose


def test_reading_usage_does_not_create_the_ledger(tmp_path: Path) -> None:
    ks = KillSwitch(ledger=tmp_path / "l.json", max_runs_per_day=1,
                    clock=Clock(datetime(2026, 3, 14, tzinfo=UTC)))
    assert ks.usage() == {"runs": 0, "spend_usd": 0.0, "reserved_usd": 0.0}
    assert not (tmp_path / "l.json").exists()
    ks.admit()
    assert ks.usage() == {"runs": 1, "spend_usd": 0.0, "reserved_usd": 0.0}


def test_every_configuration_refusal_names_the_setting(tmp_path: Path) -> None:
    led = tmp_path / "l.sqlite"
    for kw, msg in (({"max_runs_per_day": 1}, "daily ceilings need a ledger file (ledger=...)"),
                    ({"ledger": led, "max_runs_per_day": -1}, "max_runs_per_day must be >= 0"),
                    ({"ledger": led, "max_spend_per_day_usd": -1},
                     "max_spend_per_day_usd must be >= 0"),
                    ({"cost_alert_usd": 0}, "cost_alert_usd must be > 0"),
                    ({"step_reserve_usd": 0.1},
                     "step_reserve_usd must be > 0 and needs max_spend_per_day_usd"),
                    ({"ledger": led, "max_spend_per_day_usd": 1, "step_reserve_usd": 0},
                     "step_reserve_usd must be > 0 and needs max_spend_per_day_usd"),
                    ({"lease_ttl_s": 0}, "lease_ttl_s must be > 0")):
        with pytest.raises(ValueError) as e:
            KillSwitch(**kw)  # type: ignore[arg-type]
        assert str(e.value) == msg
    # zero ceilings are valid (they refuse every run); a sub-second lease is valid
    zero = KillSwitch(ledger=led, max_runs_per_day=0, max_spend_per_day_usd=0, lease_ttl_s=0.5,
                      clock=Clock(datetime(2026, 3, 14, tzinfo=UTC)))
    with pytest.raises(DailyRunCeiling):
        zero.admit()
    with pytest.raises(ValueError) as e:
        KillSwitch(clock=lambda: datetime(2026, 1, 1)).admit()  # noqa: DTZ001 - naive on purpose
    assert str(e.value) == "the kill switch clock must return an aware (UTC) datetime"


def test_admission_reports_todays_counts(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 14, 23, 0, tzinfo=timezone(timedelta(hours=-5))))  # 04:00 UTC 15th
    no_ledger = KillSwitch(clock=clock).admit()
    assert no_ledger == Admission("2026-03-15", 1, 0.0, None)
    ks = KillSwitch(ledger=tmp_path / "l.sqlite", max_spend_per_day_usd=2.0,
                    step_reserve_usd=0.5, clock=clock)
    first = ks.admit()
    assert first == Admission("2026-03-15", 1, 0.0, 2.0)
    lease, left = ks.reserve(first, "r-1")
    assert lease is not None and lease.amount_usd == 0.5 and left == 0.5
    ks.settle(first, lease, 0.3)
    second = ks.admit()
    assert second == Admission("2026-03-15", 2, 0.3, 1.7)
    held, _ = ks.reserve(second, "r-2")
    third = ks.admit()  # an open lease counts against what is left
    assert third == Admission("2026-03-15", 3, 0.3, 1.2)
    assert ks.usage() == {"runs": 3, "spend_usd": 0.3, "reserved_usd": 0.5}
    ks.settle(second, held, 0.0)
    assert ks.usage()["reserved_usd"] == 0.0


def test_reservations_count_every_open_lease_and_the_boundary(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 14, 12, tzinfo=UTC))
    ks = KillSwitch(ledger=tmp_path / "l.sqlite", max_spend_per_day_usd=1.0,
                    step_reserve_usd=0.4, clock=clock)
    adm = ks.admit()
    a, left_a = ks.reserve(adm, "a")
    b, left_b = ks.reserve(adm, "b")
    assert a is not None and b is not None and (left_a, left_b) == (0.4, 0.4)
    c, left_c = ks.reserve(adm, "c")  # 0.8 is held: 0.2 left, a step reserves 0.4
    assert c is None and left_c == pytest.approx(0.2)
    ks.settle(adm, a, 0.4)  # spent what it reserved: still 0.2 left
    again, _ = ks.reserve(adm, "c")
    assert again is None
    ks.settle(adm, b, 0.6)  # spend reached the ceiling exactly: no new run today
    assert ks.usage()["spend_usd"] == pytest.approx(1.0)
    with pytest.raises(DailySpendCeiling):
        ks.admit()
    none_left, left = ks.reserve(adm, "d")
    assert none_left is None and left == 0.0


def test_halt_reason_checks_the_flag_then_the_session_ceilings(tmp_path: Path) -> None:
    # A session of many runs (the study: one per cell) asks before starting each one.
    stop = tmp_path / "STOP"
    ks = KillSwitch(disable_file=stop, disable_env="HALT", environ={}, max_cost_usd=0.5,
                    max_calls=10, calls_unit="provider attempts")
    assert ks.halt_reason() is None
    assert ks.halt_reason(spent_usd=0.4999, calls=9) is None
    assert ks.halt_reason(spent_usd=0.5, calls=9) == "cost ceiling $0.5 reached ($0.5000 spent)"
    assert ks.halt_reason(spent_usd=0.1, calls=10) == \
        "call ceiling 10 reached (10 provider attempts)"
    # the spend ceiling is named before the call ceiling, the flag before both
    assert ks.halt_reason(spent_usd=0.7, calls=12).startswith("cost ceiling")  # type: ignore[union-attr]
    stop.touch()
    assert ks.halt_reason(spent_usd=0.7, calls=12) == f"kill switch engaged: {stop} exists"
    env = KillSwitch(disable_env="HALT", environ={"HALT": "1"}, max_calls=0)
    assert env.halt_reason() == "kill switch engaged: $HALT is set"
    assert KillSwitch(max_calls=0).halt_reason() == "call ceiling 0 reached (0 calls)"
    named = KillSwitch(disable_file=stop, flag_message="STOP file {file} present")
    assert named.halt_reason() == named.engaged() == f"STOP file {stop} present"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_cost_usd": -0.01}, "max_cost_usd must be >= 0"),
    ({"max_cost_usd": float("nan")}, "max_cost_usd must be >= 0"),
    ({"max_calls": -1}, "max_calls must be >= 0"),
])
def test_session_ceilings_refuse_negative_values(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError) as e:
        KillSwitch(**kwargs)  # type: ignore[arg-type]
    assert str(e.value) == message


# The kill switch's smaller contracts, pinned exactly: the default cost alert's log line, the
# lease lifetime written to the ledger, the UTC day under a non-UTC local zone, the alert
# boundary, usage without a ledger and the spend a finished run records.
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


# -- 4. the kill switch bites mid-run; concurrent runs cannot overshoot a daily ceiling ------------
def test_stop_flag_raised_mid_run_stops_it(tmp_path: Path) -> None:
    flag = tmp_path / "STOP"

    def decide(state: RunState) -> ToolCall:
        if state.step == 1:
            flag.touch()  # an operator raises the flag while the run is at step 2
        return ToolCall("t", {"n": state.step})

    ctl = RunController(Budget(max_steps=10, max_tokens=1000), validate=ok,
                        kill_switch=KillSwitch(disable_file=flag))
    result = ctl.run("t", decide, tools({"t": ToolResult.success({"x": 1})}))
    assert result.reason is StopReason.POLICY_BLOCK
    assert result.stop.kind == "KillSwitchStop"
    assert result.steps == 2
    assert result.handoff is not None


@pytest.mark.child_process
def test_the_kill_switch_is_read_while_waiting_for_a_claim_across_processes(
        tmp_path: Path) -> None:
    """Defect 8a: a STOP file did not end a run waiting for another process's claim; it ran
    on until its deadline (time_budget)."""
    ledger, paid, stop_file = tmp_path / "keys.sqlite", tmp_path / "paid.txt", tmp_path / "STOP"
    owner = _child(_PAYER, str(ledger), str(paid), "hangs")
    waiting = threading.Event()

    class Watched(IdempotencyLedger):
        def claim(self, *args: Any) -> Any:
            out = super().claim(*args)
            if out[0] == "in_flight":
                waiting.set()
            return out

    try:
        _until(paid.exists, "the owner's call")
        ctl = RunController(Budget(max_steps=4, max_tokens=1000, max_seconds=30), guard=PAY,
                            fold=_fold, validate=lambda s, o: True,
                            kill_switch=KillSwitch(disable_file=stop_file),
                            idempotency=Watched(ledger))
        toucher = threading.Thread(target=lambda: (waiting.wait(60), stop_file.touch()))
        toucher.start()
        retry = ctl.run("retry", _payer, lambda call: ToolResult.success({"paid": True}))
        toucher.join(60)
    finally:
        owner.kill()
        owner.communicate(timeout=60)
    assert (retry.reason, retry.stop.kind) == (StopReason.POLICY_BLOCK, "KillSwitchStop")


@pytest.mark.child_process
def test_a_stop_file_touched_by_another_process_ends_a_running_run(tmp_path: Path) -> None:
    stop_file, started = tmp_path / "STOP", tmp_path / "started"
    proc = _child(_STOPPABLE, str(stop_file), str(started))
    try:
        _until(started.exists, "the run's first tool call")
        stop_file.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1]) == {
        "reason": "policy_block", "kind": "KillSwitchStop", "handoff": True}
