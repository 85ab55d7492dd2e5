"""Bad input to `ect`: a clear one-line error and the documented exit code, nothing lost.

Each test is named after the mistake it makes. Every case here once printed a traceback,
exited with a wrong code, or went ahead with something weaker (a NaN ceiling that never
fires, a store created for a run that could not start, a study silently missing a world).
Everything runs in-process through click's CliRunner; nothing needs the sandbox.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runner.canonical import digest
from runner.cli import cli
from runner.sandbox import Limits
from runner.store import Store, generate_key

REPO = Path(__file__).resolve().parents[2]
V2_SPEC = REPO / "schedules" / "v2.toml"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_ect_error(res: Result, code: int) -> str:
    """Exit ``code``; stderr is exactly one line ``ect: ...``; no traceback or raw exception."""
    assert res.exit_code == code, (res.exit_code, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ect: "), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


def assert_usage_error(res: Result, option: str) -> None:
    """click's own usage error for a bad flag value: exit 2, names the option, no traceback."""
    assert res.exit_code == 2, (res.exit_code, res.stderr, res.exception)
    assert res.stderr.startswith("Usage: ") and "Error: Invalid value for" in res.stderr
    assert option in res.stderr
    assert "Traceback" not in res.output


def small_store(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    key = generate_key(tmp_path / "s.db.key")
    header = {
        "lock_digest": digest("ect/lock/v1", {"lock": "bad-input"}),
        "preflight_digest": digest("ect/lock/v1", {"preflight": "bad-input"}),
    }
    Store.create(path, header=header, signing_key=key).close()
    return path


# --- ect store salvage -------------------------------------------------------------------


def test_salvage_into_missing_directory(tmp_path: Path) -> None:
    src = small_store(tmp_path)
    line = assert_ect_error(invoke("store", "salvage", str(src), str(tmp_path / "no" / "x.db")), 2)
    assert "is not a directory" in line
    assert not (tmp_path / "no").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_salvage_into_unwritable_directory(tmp_path: Path) -> None:
    src = small_store(tmp_path)
    line = assert_ect_error(invoke("store", "salvage", str(src), "/proc/x.db"), 2)
    assert "cannot create a store in /proc" in line


# --- ect provider smoke ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "601"])
def test_provider_smoke_timeout_out_of_range(value: str) -> None:
    res = invoke("provider", "smoke", "--provider", "openai", "--base-url",
                 "http://127.0.0.1:9/v1", "--model", "m", "--timeout", value)
    assert_usage_error(res, "--timeout")


def test_provider_smoke_simulated_model_without_prefix() -> None:
    line = assert_ect_error(invoke("provider", "smoke", "--model", "foo"), 2)
    assert "simulated-" in line


@pytest.mark.parametrize("url", ["notaurl", "ftp://x/", "http://"])
def test_provider_smoke_unusable_base_url(url: str) -> None:
    res = invoke("provider", "smoke", "--provider", "openai", "--base-url", url, "--model", "m")
    assert assert_ect_error(res, 2).startswith("ect: --base-url: ")


def test_provider_smoke_credential_over_plain_http_to_remote() -> None:
    res = invoke("provider", "smoke", "--provider", "gemini", "--credential-env", "HOME",
                 "--base-url", "http://example.com")
    assert "use https" in assert_ect_error(res, 2)


# --- ect sandbox run ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "1e300"])
def test_sandbox_run_timeout_not_finite(value: str) -> None:
    assert_usage_error(invoke("sandbox", "run", "--timeout", value, "--", "true"), "--timeout")


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_sandbox_limits_refuse_non_finite(value: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        Limits(wall_s=value)


# --- ect run / preflight / resume / export -----------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_run_max_cost_not_a_positive_finite_number(tmp_path: Path, value: str) -> None:
    res = invoke("run", "--store", str(tmp_path / "s.db"), "--limit", "4", "--max-cost-usd", value)
    assert_usage_error(res, "--max-cost-usd")
    assert list(tmp_path.iterdir()) == []


def test_run_limit_zero(tmp_path: Path) -> None:
    assert_usage_error(invoke("run", "--store", str(tmp_path / "s.db"), "--limit", "0"), "--limit")


def test_run_openai_without_base_url_creates_nothing(tmp_path: Path) -> None:
    res = invoke("run", "--store", str(tmp_path / "s.db"), "--limit", "4", "--provider", "openai")
    assert "needs --base-url" in assert_ect_error(res, 2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["notaurl", "ftp://x/"])
def test_run_unusable_base_url_creates_nothing(tmp_path: Path, url: str) -> None:
    res = invoke("run", "--store", str(tmp_path / "s.db"), "--limit", "4", "--provider",
                 "openai", "--base-url", url)
    assert assert_ect_error(res, 2).startswith("ect: --base-url: ")
    assert list(tmp_path.iterdir()) == []


def test_run_simulated_with_base_url(tmp_path: Path) -> None:
    res = invoke("run", "--store", str(tmp_path / "s.db"), "--limit", "4", "--base-url",
                 "http://127.0.0.1:9")
    assert "simulated provider takes no --base-url" in assert_ect_error(res, 2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "preflight"])
def test_store_in_missing_directory(tmp_path: Path, command: str) -> None:
    res = invoke(command, "--store", str(tmp_path / "no" / "s.db"))
    assert "store directory" in assert_ect_error(res, 2)
    assert list(tmp_path.iterdir()) == []


def test_resume_text_file_as_store(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    store.write_bytes(b"hello\n")
    # a file that never was a store is a wrong path, named alike by every command (issue 39)
    assert ": not an ect run store (not an SQLite file" in assert_ect_error(
        invoke("resume", "--store", str(store)), 2)
    assert store.read_bytes() == b"hello\n"


def test_export_non_store_sqlite(tmp_path: Path) -> None:
    import sqlite3

    store = tmp_path / "other.db"
    with sqlite3.connect(store) as conn:
        conn.execute("CREATE TABLE t (x)")
    res = invoke("export", "--store", str(store), "--out", str(tmp_path / "m.json"))
    assert "not an ect run store" in assert_ect_error(res, 2)
    assert not (tmp_path / "m.json").exists()


# --- the study spec (ect schedule build) -------------------------------------------------

SPEC_MISTAKES = {
    "unknown_world": ('"w10", "w11"', '"w99", "w11"', "not a closed-loop world"),
    "static_world": ('"w10", "w11"', '"w00", "w11"', "not a closed-loop world"),
    "unknown_policy": ('"critic_core", "controller"', '"critic_kore", "controller"',
                       "unknown policy 'critic_kore'"),
    "nan_wall_clock": ("wall_s = 10.0", "wall_s = nan", "[sandbox].wall_s"),
    "zero_wall_clock": ("wall_s = 10.0", "wall_s = 0.0", "[sandbox].wall_s"),
    "zero_cpu": ("cpu_s = 5", "cpu_s = 0", "[sandbox].cpu_s"),
    "negative_output_cap": ("output_bytes = 1048576", "output_bytes = -1", "output_bytes"),
    "zero_model_timeout": ("timeout_s = 60.0", "timeout_s = 0.0", "[model].timeout_s"),
    "nan_temperature": ("temperature = 0.2", "temperature = nan", "[model].temperature"),
    "negative_temperature": ("temperature = 0.2", "temperature = -5", "[model].temperature"),
    "zero_max_output_tokens": ("max_output_tokens = 2048", "max_output_tokens = 0",
                               "max_output_tokens"),
    "negative_price": ("input_per_mtok = 0.30", "input_per_mtok = -0.30", "input_per_mtok"),
    "nan_price": ("input_per_mtok = 0.30", "input_per_mtok = nan", "input_per_mtok"),
    "probability_above_one": ("p_premature_finish = 0.5", "p_premature_finish = 2.0",
                              "[simulated.planner]"),
    "simulated_parameter_typo": ("p_premature_finish = 0.5", "p_premature_finsh = 0.5",
                                 "p_premature_finsh"),
    "stop_rule_typo": ("no_progress = false", "no_progres = false", "unknown field 'no_progres'"),
    "stop_rule_not_boolean": ("no_progress = false", "no_progress = 0",
                              "[stop_rules].no_progress"),
    "simulated_table_typo": ("[simulated.critic]", "[simulated.critik]", "'critik'"),
    "huge_seed_count": ("seeds = 3", "seeds = 100000000", "seeds must be at most"),
    "empty_seed_root": ('seed_root = "ect-v2/2705"', 'seed_root = ""', "seed_root"),
    "design_key_typo": ("seeds = 3", "sedes = 3", "unknown field 'sedes'"),
    "seeds_as_string": ("seeds = 3", 'seeds = "3"', "seeds must be int"),
}


@pytest.mark.parametrize("case", sorted(SPEC_MISTAKES))
def test_spec_mistake(tmp_path: Path, case: str) -> None:
    old, new, expected = SPEC_MISTAKES[case]
    text = V2_SPEC.read_text(encoding="utf-8")
    assert old in text
    spec = tmp_path / "v2.toml"
    spec.write_text(text.replace(old, new, 1), encoding="utf-8")
    line = assert_ect_error(invoke("schedule", "build", "--study", str(spec)), 2)
    assert expected in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v2.toml"]


# --- ect static / report -----------------------------------------------------------------


def test_static_gemini_without_credential(tmp_path: Path) -> None:
    res = invoke("static", "--out", str(tmp_path / "o"), "--provider", "gemini")
    assert "credential" in assert_ect_error(res, 2)


def test_static_unusable_base_url(tmp_path: Path) -> None:
    res = invoke("static", "--out", str(tmp_path / "o"), "--provider", "openai", "--base-url",
                 "notaurl")
    assert "scheme" in assert_ect_error(res, 2)


def test_report_missing_schedule(tmp_path: Path) -> None:
    store = small_store(tmp_path)
    res = invoke("report", "--store", str(store), "--out", str(tmp_path / "o"), "--schedule",
                 str(tmp_path / "missing.jsonl"))
    assert_usage_error(res, "--schedule")
    assert not (tmp_path / "o").exists()


def test_export_onto_the_store_itself(tmp_path: Path) -> None:
    # The manifest is written by atomic replace: this used to replace the run store with it.
    store = small_store(tmp_path)
    before = store.read_bytes()
    res = invoke("export", "--store", str(store), "--out", str(store))
    assert "already exists" in assert_ect_error(res, 2)
    assert store.read_bytes() == before


def test_export_onto_an_existing_file(tmp_path: Path) -> None:
    store = small_store(tmp_path)
    out = tmp_path / "notes.json"
    out.write_bytes(b"keep me\n")
    res = invoke("export", "--store", str(store), "--out", str(out))
    assert "already exists" in assert_ect_error(res, 2)
    assert out.read_bytes() == b"keep me\n"


def test_export_into_missing_directory(tmp_path: Path) -> None:
    store = small_store(tmp_path)
    res = invoke("export", "--store", str(store), "--out", str(tmp_path / "no" / "m.json"))
    assert "--out directory" in assert_ect_error(res, 2)


def test_static_with_an_unreachable_provider_is_not_a_success(tmp_path: Path) -> None:
    """Every model call failing (nothing listens on the port) must not exit 0 with tables that
    look like model measurements; the failures are counted and the command exits 5."""
    res = invoke("static", "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "static"))
    assert res.exit_code == 5, (res.exit_code, res.stderr, res.exception)
    lines = [line for line in res.stderr.splitlines() if not line.startswith("static: ")]
    assert lines[0].startswith("ect: warning: 612 of 612 model calls failed")
    assert lines[-1] == ("ect: every model call failed: these tables are not model measurements "
                         "(check the provider, --base-url and the credential)")
    assert "Traceback" not in res.output
