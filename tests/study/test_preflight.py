"""Preflight refuses every broken precondition with one line naming what and where; a changed
spec, prompt or sandbox profile makes both preflight and resume refuse, naming the drift."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import runner.policies
import runner.sandbox
import runner.study._lock as lock_module
import runner.study._preflight as preflight_module
from runner.canonical import canonical_bytes
from runner.study import (
    PreflightFailed,
    PreflightReport,
    ProviderChoice,
    RunSettings,
    execute,
    read_lock,
    read_schedule,
    study_paths,
)
from tests.study.conftest import Reference
from tests.study.support import (
    REPO,
    ect,
    make_study,
    preflight,
    relock,
    run,
    tampered_copy,
)


def _failed(report: PreflightReport) -> dict[str, str]:
    return {c.name: c.detail for c in report.checks if not c.ok}


def _refused(report: PreflightReport, check: str, *needles: str) -> str:
    """The report failed at ``check`` (first failure), its line holds every needle, and no
    probe ran after the failure."""
    assert not report.passed
    first = next(c for c in report.checks if not c.ok)
    assert first.name == check, [c.to_json() for c in report.checks]
    for needle in needles:
        assert needle in first.detail, first.detail
    assert not any(c.name.startswith("probe.") for c in report.checks)
    assert not _sandbox_threads()  # the sandbox's checks, started alongside, were stopped
    line = str(PreflightFailed(report))
    assert line.startswith(f"preflight failed: {check}: ") and "\n" not in line
    return first.detail


def _sandbox_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ect-preflight-sandbox" and t.is_alive()]


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """A fresh copy of the small study, free to be edited."""
    return make_study(tmp_path / "study")


# --- each failure mode -----------------------------------------------------------------------


def test_missing_lock(study: Path, tmp_path: Path) -> None:
    lock = study_paths(study).lock
    lock.unlink()
    detail = _refused(preflight(study, tmp_path / "s.db"), "lock", str(lock), "ect schedule lock")
    assert "cannot read lock" in detail


def test_stale_lock_spec_edited_after_locking(study: Path, tmp_path: Path) -> None:
    study.write_text(study.read_text("utf-8").replace("wall_s = 10.0", "wall_s = 9.0"), "utf-8")
    _refused(preflight(study, tmp_path / "s.db"), "lock", "lock drift: spec.sha256")


def test_stale_lock_source_tree_changed(study: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_module, "source_tree_digest", lambda root=None: "sha256:" + "0" * 64)
    _refused(preflight(study, tmp_path / "s.db"), "lock", "lock drift: source_tree", "0" * 16)


def test_schedule_file_edited(study: Path, tmp_path: Path) -> None:
    schedule = study_paths(study).schedule
    data = schedule.read_bytes()
    first = read_schedule(schedule)[0]
    schedule.write_bytes(data.replace(f'"seed":{first.seed},'.encode(),
                                      f'"seed":{first.seed + 1},'.encode(), 1))
    _refused(preflight(study, tmp_path / "s.db"), "lock", "lock drift: schedule.sha256")


def test_schedule_rows_reordered(study: Path, tmp_path: Path) -> None:
    schedule = study_paths(study).schedule
    lines = schedule.read_bytes().splitlines(keepends=True)
    schedule.write_bytes(b"".join([lines[1], lines[0], *lines[2:]]))
    _refused(preflight(study, tmp_path / "s.db"), "lock", f"{schedule}:1: expected row 1, got 2")


def test_schedule_relocked_but_not_what_the_spec_builds(study: Path, tmp_path: Path) -> None:
    """Editing the schedule and relocking does not launder it: rows must be the spec's."""
    from runner.study import load_spec, write_lock

    schedule = study_paths(study).schedule
    schedule.write_bytes(schedule.read_bytes().replace(b'"seed_index":0', b'"seed_index":7', 1))
    write_lock(load_spec(study), study_paths(study), replace=True)
    _refused(preflight(study, tmp_path / "s.db"), "lock", "schedule.rows", "row 1")


def test_store_from_another_lock(reference: Reference, tmp_path: Path) -> None:
    other = make_study(tmp_path / "other",
                       edits={'seed_root = "ect-v2/2705"': 'seed_root = "ect-v2/other"'})
    detail = _refused(preflight(other, reference.store), "store", str(reference.store),
                      "was made under lock")
    assert read_lock(study_paths(other).lock) != read_lock(study_paths(reference.spec).lock)
    assert "not sha256:" in detail


def test_store_damaged(reference: Reference, tmp_path: Path) -> None:
    store = tampered_copy(reference.store, tmp_path / "damaged.db", 7)
    _refused(preflight(reference.spec, store), "store", str(store), "does not verify", "seq 7")


def test_store_holding_more_than_the_schedule(reference: Reference, tmp_path: Path) -> None:
    """A store of the full study is no prefix of a study locked to fewer rows."""
    shorter = make_study(tmp_path / "short", edits={
        'policies = ["critic_core", "controller", "full_trace", "ect"]':
        'policies = ["critic_core", "controller", "full_trace"]'})
    _refused(preflight(shorter, reference.store), "store", "was made under lock")


def test_credential_given_for_simulated(study: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECT_TEST_KEY", "k-123")
    _refused(preflight(study, tmp_path / "s.db", ProviderChoice("simulated",
                                                                credential_env="ECT_TEST_KEY")),
             "credential", "simulated provider takes no credential")
    key = tmp_path / "key"
    key.write_text("k-123")
    key.chmod(0o600)
    _refused(preflight(study, tmp_path / "s.db",
                       ProviderChoice("simulated", credential_file=str(key))),
             "credential", "simulated provider takes no credential")


def test_model_or_base_url_given_for_simulated_is_refused_not_ignored(study: Path,
                                                                       tmp_path: Path) -> None:
    # One validation (runner.providers.check_provider_settings) for run, static, smoke and
    # preflight: a non-simulated model name or a --base-url is refused, never ignored.
    _refused(preflight(study, tmp_path / "s.db", ProviderChoice("simulated", model="other")),
             "credential", "a simulated model name must start with 'simulated-', got 'other'")
    _refused(preflight(study, tmp_path / "s.db",
                       ProviderChoice("simulated", base_url="http://127.0.0.1:9")),
             "credential", "the simulated provider takes no --base-url")


def test_missing_credential_for_gemini(study: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _refused(preflight(study, tmp_path / "s.db", ProviderChoice("gemini")), "credential",
             "--credential-file", "--credential-env")
    monkeypatch.delenv("ECT_UNSET_KEY", raising=False)
    _refused(preflight(study, tmp_path / "s.db",
                       ProviderChoice("gemini", credential_env="ECT_UNSET_KEY")),
             "credential", "ECT_UNSET_KEY is not set")
    _refused(preflight(study, tmp_path / "s.db",
                       ProviderChoice("gemini", credential_file=str(tmp_path / "nope"))),
             "credential", "does not exist")


def test_group_readable_credential_file(study: Path, tmp_path: Path) -> None:
    key = tmp_path / "gemini.key"
    key.write_text("k-123\n")
    key.chmod(0o640)
    detail = _refused(preflight(study, tmp_path / "s.db",
                                ProviderChoice("gemini", credential_file=str(key))),
                      "credential", str(key), "0640", "chmod 600")
    assert "k-123" not in detail


def test_model_differs_from_the_lock(study: Path, tmp_path: Path) -> None:
    key = tmp_path / "gemini.key"
    key.write_text("k-123\n")
    key.chmod(0o600)
    report = preflight(study, tmp_path / "s.db",
                       ProviderChoice("gemini", model="gemini-2.5-pro", credential_file=str(key)))
    _refused(report, "generation", "'gemini-2.5-pro' differs from the frozen 'gemini-2.5-flash'")
    assert set(_failed(report)) == {"generation", "probes"}


def test_lock_generation_config_edited(study: Path, tmp_path: Path) -> None:
    lock_path = study_paths(study).lock
    lock = read_lock(lock_path).to_json()
    lock["generation"]["temperature"] = 0.7
    lock_path.write_bytes(canonical_bytes(lock) + b"\n")
    _refused(preflight(study, tmp_path / "s.db"), "lock",
             "lock drift: generation.temperature: locked 0.7, now 0.2")


# --- drift against a started store: preflight and resume both refuse ---------------------------


@pytest.fixture
def started(tmp_path: Path) -> tuple[Path, Path]:
    """A study of its own with its first 2 cells committed."""
    spec = make_study(tmp_path / "study")
    store = tmp_path / "runs" / "v2.db"
    store.parent.mkdir()
    assert run(spec, store, limit=2).committed == 2
    return spec, store


def _refuses_both(spec: Path, store: Path, needle: str) -> None:
    _refused(preflight(spec, store), "lock", needle)
    with pytest.raises(PreflightFailed, match=f"preflight failed: lock: .*{needle}"):
        execute(RunSettings(spec, store), resume=True)
    with pytest.raises(PreflightFailed, match=needle):
        execute(RunSettings(spec, store))


def test_changed_spec_refuses_preflight_and_resume(started: tuple[Path, Path]) -> None:
    spec, store = started
    spec.write_text(spec.read_text("utf-8").replace("cpu_s = 5", "cpu_s = 4"), "utf-8")
    _refuses_both(spec, store, "spec.sha256")
    done = ect("resume", "--store", str(store), "--study", str(spec))
    assert done.returncode == 3, done.stderr
    assert "preflight failed: lock: lock drift: spec.sha256" in done.stderr
    # Relocking makes a new lock: the store, made under the old one, is still refused.
    relock(spec)
    _refused(preflight(spec, store), "store", "was made under lock")


def test_changed_prompt_refuses_preflight_and_resume(started: tuple[Path, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spec, store = started
    real = runner.policies.prompt_digests()
    monkeypatch.setattr(runner.policies, "prompt_digests",
                        lambda: {**real, "planner": "sha256:" + "1" * 64})
    _refuses_both(spec, store, "prompts.planner")


def test_changed_sandbox_profile_refuses_preflight_and_resume(
        started: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, store = started
    real = runner.sandbox.verify_pins()
    assert "sandbox_profiles/seccomp.toml" in real
    monkeypatch.setattr(runner.sandbox, "verify_pins",
                        lambda root=None: {**real, "sandbox_profiles/seccomp.toml": "2" * 64})
    _refuses_both(spec, store, "sandbox_pins.sandbox_profiles/seccomp.toml")


def _copy_tree(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("runner", "sandbox_profiles", "preflight"):
        shutil.copytree(REPO / part, dest / part, ignore=ignore)
    return dest


def test_edited_files_in_a_copied_tree_refuse(tmp_path: Path) -> None:
    """The real files, not a patched digest: a copy of the tree is locked, then a prompt and
    (separately) a sandbox profile are edited; `ect preflight` run from the copy refuses."""
    tree = _copy_tree(tmp_path / "tree")
    spec = make_study(tmp_path / "study")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(tree)

    def ect_in_copy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "runner", *args], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    locked = ect_in_copy("schedule", "lock", "--study", str(spec), "--replace")
    assert locked.returncode == 0, locked.stderr
    store = tmp_path / "s.db"
    for rel, needle in (("runner/policies/prompts/planner.txt", "lock drift: prompts.planner"),
                        ("sandbox_profiles/seccomp.toml", "sandbox_profiles/seccomp.toml")):
        original = (tree / rel).read_bytes()
        (tree / rel).write_bytes(original + b"\n# edited\n")
        checked = ect_in_copy("preflight", "--study", str(spec), "--store", str(store))
        (tree / rel).write_bytes(original)
        assert checked.returncode == 3, checked.stdout + checked.stderr
        assert "preflight failed: lock: " in checked.stderr and needle in checked.stderr
        assert not store.exists()


_ABSENT_STORE = """
import sys
from pathlib import Path
from runner.study._preflight import _store_prefix
ok, detail, n = _store_prefix(Path(sys.argv[1]), "sha256:" + "0" * 64, [])
print(ok, n, "runner.store" in sys.modules, "sqlite_utils" in sys.modules)
"""


def test_an_absent_store_is_checked_without_loading_the_store(tmp_path: Path) -> None:
    # Issue 37: `ect preflight` of a new store imported the store's SQLite layer (sqlite_utils,
    # which imports numpy: a tenth of a second) only to find the file absent.
    out = subprocess.run([sys.executable, "-c", _ABSENT_STORE, str(tmp_path / "absent.db")],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "0", "False", "False"]


# --- the sandbox's checks start alongside the lock check (issue 37 item 7) ---------------------


def test_the_sandbox_starts_while_the_lock_is_checked(study: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock check (rebuilding the task manifest: single-threaded CPU work) ran before the
    sandbox's self-check and probes started, one CPU of two idle; they now start alongside it
    and are judged in the same order as before."""
    started = threading.Event()
    real_select, real_check = runner.sandbox.select_backend, lock_module.check_lock

    def select(*args: object, **kwargs: object) -> object:
        started.set()
        return real_select(*args, **kwargs)  # type: ignore[arg-type]

    seen: list[bool] = []

    def check(spec_path: str | Path) -> object:
        seen.append(started.wait(timeout=10))
        return real_check(spec_path)

    monkeypatch.setattr(runner.sandbox, "select_backend", select)
    monkeypatch.setattr(preflight_module, "check_lock", check)
    report = preflight(study, tmp_path / "s.db")
    assert seen == [True]
    assert report.passed, [c.to_json() for c in report.checks if not c.ok]
    names = [c.name for c in report.checks]
    assert names[:5] == ["lock", "store", "credential", "generation", "sandbox"]
    assert names[5:] and all(n.startswith("probe.network.") or n.startswith("probe.write.")
                             for n in names[5:])  # fmt: skip
    assert not _sandbox_threads()


def test_a_failed_check_stops_the_probes_unjudged(reference: Reference, tmp_path: Path) -> None:
    store = tampered_copy(reference.store, tmp_path / "damaged.db", 7)
    report = preflight(reference.spec, store)
    _refused(report, "store", "does not verify")
    assert [c.name for c in report.checks] == ["lock", "store", "credential", "generation",
                                               "sandbox", "probes"]  # fmt: skip
    assert report.checks[-1].detail == "not judged: an earlier check failed"


def test_a_sandbox_that_cannot_start_is_the_sandbox_check(study: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise runner.sandbox.SandboxUnavailable("no bwrap here (test)")

    monkeypatch.setattr(runner.sandbox, "select_backend", refuse)
    _refused(preflight(study, tmp_path / "s.db"), "sandbox", "no bwrap here (test)")


def test_a_bug_in_the_sandbox_thread_is_raised_in_the_caller(study: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("a bug, not a verdict")

    monkeypatch.setattr(runner.sandbox, "select_backend", broken)
    with pytest.raises(RuntimeError, match="a bug, not a verdict"):
        preflight(study, tmp_path / "s.db")
    assert not _sandbox_threads()
