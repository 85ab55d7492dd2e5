"""The viewer reads a store's header once, strictly (runner.study.StoreHeader): a run's header,
or the forms of a store no `ect run` wrote; a header that is neither is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.canonical import canonical_bytes, raw_digest
from runner.store import Store, generate_key, load_signing_key
from runner.view import StoreSource, ViewError, run_summary

D = "sha256:" + "0" * 64


def _store(tmp_path: Path, header: dict[str, Any], blobs: tuple[bytes, ...] = ()) -> Path:
    key = tmp_path / "k"
    generate_key(key)
    path = tmp_path / "s.db"
    Store.create(path, header={"lock_digest": D, "preflight_digest": D, **header},
                 signing_key=load_signing_key(key), blobs=blobs).close()
    return path


def test_a_provider_object_header_is_shown_by_name(tmp_path: Path) -> None:
    path = _store(tmp_path, {"provider": {"name": "x", "model": "y", "simulated": True},
                             "schedule_rows": 4})
    run = run_summary(StoreSource(path), integrity=None)
    assert run["provider"] == "x" and run["simulated"] is True
    assert "SIMULATED" in run["provider_line"] and run["progress"]["total"] == 4
    assert run["study"] is None and run["preflight"] is None


def test_the_preflight_report_is_read_strictly(tmp_path: Path) -> None:
    doc = {"format": "ect.preflight/1", "study": "s", "spec": "v2.toml", "store": "s.db",
           "provider": {"name": "simulated", "model": None, "base_url": None,
                        "credential_file": None, "credential_env": None},
           "lock_digest": D, "committed_rows": 0, "probes": "all", "sandbox": {},
           "passed": True, "checks": [{"name": "lock", "ok": True, "detail": "pins"}]}
    blob = canonical_bytes(doc)
    path = _store(tmp_path, {"preflight_blob": raw_digest(blob)}, (blob,))
    run = run_summary(StoreSource(path), integrity=None)
    assert run["preflight"] == {"passed": True, "probes": "all",
                                "checks": [{"name": "lock", "ok": True, "detail": "pins"}]}


@pytest.mark.parametrize("header, needle", [
    ({"study": "s"}, "header: missing field"),
    ({"spec": "v2.toml"}, "unknown field 'spec'"),
    ({"provider": "x", "simulated": "yes"}, "header.simulated: expected a boolean"),
])
def test_a_header_that_is_not_a_run_header_is_refused(tmp_path: Path, header: dict[str, Any],
                                                       needle: str) -> None:
    path = _store(tmp_path, header)
    with pytest.raises(ViewError, match="not an ect run store") as info:
        StoreSource(path)
    assert needle in str(info.value)
