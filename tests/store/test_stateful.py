"""Hypothesis state machine: append / crash / resume / checkpoint / tamper against a model.

Crashes are injected in-process through the store's hook (the subprocess SIGKILL tests in
test_crash.py cover real process death); the model says exactly what each crash point leaves
behind. Tampering works on a copy of the closed files and is always undone afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from runner.canonical import canonical_bytes
from runner.store import Store, checkpoint_path, generate_key, verify_store

from .conftest import drop_triggers, make_header, raw, restore_triggers


class Crash(BaseException):
    """Stands for the process dying at a crash point (not an Exception: nothing catches it)."""


APPEND_POINTS = {"append.before_begin": 0, "append.after_insert": 0, "append.after_commit": 1}
CHECKPOINT_POINTS = ["checkpoint.mid_file", "checkpoint.after_rename", "checkpoint.after_commit"]


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ect-store-sm-"))
        self.key = generate_key(self.dir / "k")
        self.path = self.dir / "s.db"
        self.crash_at: str | None = None
        self.store: Store | None = Store.create(
            self.path, header=make_header(), signing_key=self.key, hook=self._hook
        )
        self.model: list[dict[str, Any]] = []  # bodies of records 1..
        self.cp_size = 1  # size of the newest checkpoint the store must honour

    def _hook(self, point: str) -> None:
        if point == self.crash_at:
            self.crash_at = None
            raise Crash(point)

    def _open(self) -> Store:
        if self.store is None:
            self.store = Store.open(self.path, signing_key=self.key, hook=self._hook)
        return self.store

    @rule(n=st.integers(min_value=0, max_value=10_000), text=st.text(max_size=20))
    def append(self, n: int, text: str) -> None:
        body = {"n": n, "text": text, "cell_id": f"c{len(self.model)}"}
        assert self._open().append(body) == len(self.model) + 1
        self.model.append(body)

    @rule(point=st.sampled_from(sorted(APPEND_POINTS)))
    def crash_during_append(self, point: str) -> None:
        store = self._open()
        body = {"crash": point, "cell_id": f"c{len(self.model)}"}
        self.crash_at = point
        with pytest.raises(Crash):
            store.append(body)
        if APPEND_POINTS[point]:
            self.model.append(body)  # committed, though never acknowledged
        self._abandon()

    @rule()
    def checkpoint(self) -> None:
        self._open().checkpoint()
        self.cp_size = len(self.model) + 1

    @rule(point=st.sampled_from(CHECKPOINT_POINTS))
    def crash_during_checkpoint(self, point: str) -> None:
        store = self._open()
        self.crash_at = point
        with pytest.raises(Crash):
            store.checkpoint()
        if point != "checkpoint.mid_file":
            self.cp_size = len(self.model) + 1  # the external file already moved on
        self._abandon()

    def _abandon(self) -> None:
        # The "dead process" leaves its connection behind without a clean shutdown.
        assert self.store is not None
        self.store.close()
        self.store = None

    @rule()
    def resume(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        self._open()

    @precondition(lambda self: len(self.model) >= 1)
    @rule(data=st.data(), kind=st.sampled_from(["edit", "truncate", "flip_checkpoint"]))
    def tamper(self, data: st.DataObject, kind: str) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        saved = {p: p.read_bytes() for p in (self.path, checkpoint_path(self.path))}
        try:
            if kind == "edit":
                seq = data.draw(st.integers(min_value=1, max_value=len(self.model)))
                self._sql(
                    "UPDATE records SET body = ? WHERE seq = ?", canonical_bytes({"x": 1}), seq
                )
                rep = verify_store(self.path, full=True)
                assert (rep.damage, rep.first_bad_seq) == ("tamper", seq), rep.detail
            elif kind == "truncate":
                if self.cp_size < 2:
                    return  # records after the newest checkpoint are not protected (documented)
                seq = data.draw(st.integers(min_value=1, max_value=self.cp_size - 1))
                self._sql("DELETE FROM records WHERE seq >= ?", seq)
                rep = verify_store(self.path)
                assert (rep.damage, rep.first_bad_seq) == ("truncation", seq), rep.detail
            else:
                p = checkpoint_path(self.path)
                b = bytearray(p.read_bytes())
                b[b.index(b'"signature":"') + 20] ^= 0x01
                p.write_bytes(bytes(b))
                rep = verify_store(self.path)
                assert rep.damage == "signature", rep.detail
        finally:
            for p, b in saved.items():
                p.write_bytes(b)

    def _sql(self, sql: str, *args: object) -> None:
        conn = raw(self.path)
        trig = drop_triggers(conn)
        conn.execute(sql, args)
        restore_triggers(conn, trig)
        conn.close()

    @invariant()
    def store_matches_model(self) -> None:
        store = self._open()
        assert store.count == len(self.model) + 1
        assert [r.body for r in store.records()] == self.model
        latest = store.latest_checkpoint()
        assert latest is not None and latest["checkpoint"]["size"] <= self.cp_size

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
        rep = verify_store(self.path, full=True)
        assert rep.ok, rep.detail
        shutil.rmtree(self.dir, ignore_errors=True)


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
