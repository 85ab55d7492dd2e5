"""The attempt journal of a run store (docs/store.md): every provider attempt is journaled
(``attempt_begin``) before it is sent and ended (``attempt_end``, with any response bytes as
blobs in the same transaction) when it returns, in a hash chain of its own beside the records.
The store knows no field of an entry beyond its ``cell_id``; :meth:`AttemptJournal.attempts`
reads the journal back, :meth:`AttemptJournal.orphan_attempts` the attempts of cells that never
committed. Mixed into :class:`runner.store.Store`, whose connection, lock and transactions it
uses.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from runner.canonical import JsonObject, canonical_bytes, loads_strict, raw_digest
from runner.errors import FormatError
from runner.store._db import GENESIS, attempt_chain_hash
from runner.store._errors import AttemptError, AttemptJournalDamaged
from runner.store._journal_row import JournalRow
from runner.store.merkle import leaf_hash

__all__ = ["AttemptJournal"]


class AttemptJournal:
    """The attempt journal's methods of :class:`runner.store.Store`."""

    if TYPE_CHECKING:  # provided by the store
        _conn: sqlite3.Connection
        _lock: threading.RLock
        _store_id: bytes

        def _live(self) -> sqlite3.Connection: ...

        def _transaction(self) -> AbstractContextManager[None]: ...

    # ---- attempt journal ----------------------------------------------------------------

    def _append_attempt(self, kind: str, ref: int | None, cell_id: str, body: bytes,
                        blobs: Sequence[bytes] = ()) -> int:
        leaf = leaf_hash(body)
        prepared = [(raw_digest(bytes(b)), bytes(b)) for b in blobs]
        with self._lock:
            with self._transaction():
                conn = self._conn
                if prepared:
                    conn.executemany(
                        "INSERT INTO blobs (digest, data) VALUES (?, ?) "
                        "ON CONFLICT(digest) DO NOTHING", prepared)
                if ref is not None:
                    row = conn.execute(
                        "SELECT kind, cell_id FROM attempts WHERE seq = ?", (ref,)
                    ).fetchone()
                    if row is None or row[0] != "begin":
                        raise AttemptError(f"attempt {ref} was never begun")
                    if conn.execute(
                        "SELECT 1 FROM attempts WHERE kind = 'end' AND ref = ?", (ref,)
                    ).fetchone():
                        raise AttemptError(f"attempt {ref} has already ended")
                last = conn.execute(
                    "SELECT seq, chain FROM attempts ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                seq, prev = (last[0] + 1, last[1]) if last else (0, GENESIS)
                chain = attempt_chain_hash(self._store_id, seq, prev, leaf)
                conn.execute(
                    "INSERT INTO attempts (seq, kind, ref, cell_id, body, leaf, chain) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (seq, kind, ref, cell_id, body, leaf, chain),
                )
        return seq

    def attempt_begin(self, entry: dict[str, Any]) -> int:
        """Journal a provider attempt BEFORE it is sent; returns its attempt seq (durable).

        ``entry`` must carry ``cell_id`` (str); the rest is the caller's (request digest, ...).
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("cell_id"), str):
            raise TypeError("an attempt entry must be a dict with a string cell_id")
        cell_id = entry["cell_id"]
        body = canonical_bytes({"kind": "begin", "cell_id": cell_id, "entry": entry})
        return self._append_attempt("begin", None, cell_id, body)

    def attempt_end(self, attempt_seq: int, entry: dict[str, Any], *,
                    blobs: Sequence[bytes] = ()) -> int:
        """Journal the end of attempt ``attempt_seq``; returns the end entry's seq. ``blobs``
        (the response bytes, say) are stored in the same transaction, under their digests.

        Raises:
            AttemptError: no such begun attempt, or it already ended.
        """
        if not isinstance(entry, dict):
            raise TypeError("an attempt entry must be a dict")
        if not isinstance(attempt_seq, int) or isinstance(attempt_seq, bool):
            raise TypeError("attempt_seq must be an int")
        with self._lock:
            row = (
                self._live()
                .execute(
                    "SELECT cell_id FROM attempts WHERE seq = ? AND kind = 'begin'", (attempt_seq,)
                )
                .fetchone()
            )
            if row is None:
                raise AttemptError(f"attempt {attempt_seq} was never begun")
            cell_id = row[0]
            body = canonical_bytes(
                {"kind": "end", "cell_id": cell_id, "begin_seq": attempt_seq, "entry": entry}
            )
            return self._append_attempt("end", attempt_seq, cell_id, body, blobs)

    def attempts(self) -> list[JournalRow]:
        """Every attempt, in begin order, with its end entry (``None`` while it has not
        ended)."""
        with self._lock:
            rows = (
                self._live()
                .execute("SELECT seq, kind, ref, body FROM attempts ORDER BY seq")
                .fetchall()
            )
        begins: dict[int, tuple[str, JsonObject]] = {}
        ends: dict[int, tuple[JsonObject, int]] = {}
        for seq, kind, ref, body in rows:
            try:
                obj = loads_strict(body)
            except FormatError as e:
                raise AttemptJournalDamaged(
                    f"attempt {seq}: body is not valid JSON ({e}); run `ect store verify "
                    "--full`", seq=seq) from e
            if not (isinstance(obj, dict) and isinstance(obj.get("cell_id"), str)
                    and isinstance(obj.get("entry"), dict)):
                raise AttemptJournalDamaged(
                    f"attempt {seq}: not a journal entry; run `ect store verify --full`",
                    seq=seq)
            if kind == "begin":
                begins[seq] = (obj["cell_id"], obj["entry"])
            elif ref in begins:
                ends[ref] = (obj["entry"], seq)
        return [JournalRow(seq, cell_id, begin, *ends.get(seq, (None, None)))
                for seq, (cell_id, begin) in begins.items()]

    def orphan_attempts(self, committed: Collection[str]) -> list[JournalRow]:
        """Attempts (ended or not) whose ``cell_id`` is not in ``committed``, the caller's ids of
        the cells its committed records hold (the store reads no field of a record body):
        calls that were made, and possibly paid for, by a trajectory that never committed."""
        done = set(committed)
        return [a for a in self.attempts() if a.cell_id not in done]
