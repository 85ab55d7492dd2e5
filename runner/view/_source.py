"""Read-only access to a run store for the viewer: never writes, never takes the run lock.

The store is opened through SQLite's URI interface with ``mode=ro``. When the store has no
``-wal`` file (no writer has it open and everything is checkpointed into the main file), even a
read-only connection would create ``-wal``/``-shm`` files, so the viewer then opens it with
``immutable=1`` (no files created, no locks taken) and checks afterwards that the file was not
changed underneath it (same inode, size and mtime, still no ``-wal``); if it was, the read is
retried with ``mode=ro``, which follows a live writer's WAL like any other reader. Records are
append-only, so parsed records are cached by sequence number and only newer ones are read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from runner.canonical import JsonValue, canonical_bytes
from runner.errors import FormatError
from runner.store import (
    FileCorrupt,
    StoreReport,
    checkpoint_path,
    foreign_file,
    merkle,
    verify_store,
)
from runner.study import CellRecord, StoreHeader
from runner.view._errors import NotFound, RecordDamaged, ViewError

__all__ = ["RawRecord", "StoreSource"]

T = TypeVar("T")
# Damage kinds a verification racing a live writer can report for a moment.
_RACY = frozenset({"truncation", "stale_checkpoint", "missing_checkpoint"})


@dataclass(frozen=True)
class RawRecord:
    seq: int
    body: bytes
    leaf: bytes
    chain: bytes
    prev_chain: bytes


def _read_cell(seq: int, body: bytes, leaf: bytes | None) -> CellRecord | ViewError:
    """Record ``seq`` as a cell record; one that is not is damage (``tamper``) when its body
    no longer hashes to its stored leaf, else a record of another kind of store."""
    try:
        return CellRecord.from_json(json.loads(body), f"record {seq}")
    except (ValueError, FormatError) as e:
        if leaf is not None and merkle.leaf_hash(body) != leaf:
            return RecordDamaged(f"record {seq} is not a cell record (its body does not match "
                                 f"its leaf hash): {e}", kind="tamper", seq=seq)
        return ViewError(f"record {seq} is not a cell record: {e}")


def _uri(path: Path, *, immutable: bool) -> str:
    p = str(path.resolve()).replace("?", "%3f").replace("#", "%23")
    return f"file:{p}?mode=ro" + ("&immutable=1" if immutable else "")


class StoreSource:
    """A run store opened for reading only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ViewError(f"{self.path}: no such store file")
        self._lock = threading.Lock()
        self._cells: dict[int, CellRecord | ViewError] = {}
        self._header: StoreHeader | None = None
        self._quick: tuple[tuple[object, ...], StoreReport] | None = None
        # Named as every command names it: a file that never was a store is a wrong path
        # (ViewError, exit 2); a store cut short or overwritten is damage (FileCorrupt, exit 3).
        with self._read() as conn:
            try:
                app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            except sqlite3.Error as e:
                if foreign_file(self.path):
                    raise ViewError(f"{self.path}: not an ect run store (not an SQLite file, "
                                    "and no store checkpoint beside it)") from e
                raise FileCorrupt(f"{self.path}: SQLite reports a damaged file: {e}") from e
            if app_id != 0x45435453 and not checkpoint_path(self.path).exists():
                raise ViewError(f"{self.path}: not an ect run store (application_id {app_id})")
            try:
                row = conn.execute("SELECT body FROM records WHERE seq = 0").fetchone()
            except sqlite3.Error as e:
                raise FileCorrupt(f"{self.path}: SQLite reports a damaged file: {e}") from e
        if app_id != 0x45435453 or row is None:
            raise FileCorrupt(f"{self.path}: no ECTS header record, yet a store checkpoint "
                              "lies beside it" if app_id != 0x45435453 else
                              f"{self.path}: no header record (record 0)")
        try:
            doc = json.loads(row[0])
            if not isinstance(doc, dict):
                raise ViewError(f"{self.path}: not an ect run store (its header is not an object)")
            self._header = StoreHeader.from_header(doc)
        except (ValueError, FormatError) as e:
            raise ViewError(f"{self.path}: not an ect run store (its header: {e})") from e

    # ---- connections ---------------------------------------------------------------------

    def _wal(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    def _stat(self) -> tuple[int, int, int]:
        st = self.path.stat()
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    @contextmanager
    def _connect(self, immutable: bool) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(_uri(self.path, immutable=immutable), uri=True,
                                   check_same_thread=False, timeout=10.0)
        except sqlite3.Error as e:
            raise ViewError(f"{self.path}: cannot open read-only ({e})") from e
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("PRAGMA trusted_schema = OFF")
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._connect(immutable=not self._wal().exists()) as conn:
            yield conn

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a read-only connection inside one read transaction."""
        with self._lock:
            for _ in range(3):
                immutable = not self._wal().exists()
                before = self._stat()
                with self._connect(immutable) as conn:
                    try:
                        conn.execute("BEGIN")
                        out = fn(conn)
                        conn.execute("COMMIT")
                    except sqlite3.Error as e:
                        # closing the connection ends the read transaction
                        raise ViewError(f"{self.path}: read failed ({e})") from e
                if not immutable or (not self._wal().exists() and self._stat() == before):
                    return out
            raise ViewError(f"{self.path}: the store kept changing while it was read")

    # ---- reads ---------------------------------------------------------------------------

    @property
    def header(self) -> StoreHeader:
        """Record 0, read once (strictly) when the store was opened."""
        assert self._header is not None
        return self._header

    def count(self) -> int:
        return int(self.run(lambda c: c.execute("SELECT COUNT(*) FROM records").fetchone()[0]))

    def cells(self) -> dict[int, CellRecord | ViewError]:
        """Every committed record n >= 1 read as a :class:`runner.study.CellRecord`, reading
        only those not seen before; a record that is not one maps to the error naming why."""
        start = max(self._cells, default=0) + 1
        try:
            rows = self.run(lambda c: c.execute(
                "SELECT seq, body, leaf FROM records WHERE seq >= ? ORDER BY seq",
                (start,)).fetchall())
        except ViewError:
            self._cells.update(self._cells_one_by_one(start))
            return self._cells
        for seq, body, leaf in rows:
            self._cells[int(seq)] = _read_cell(int(seq), body, bytes(leaf))
        return self._cells

    def damaged(self) -> list[RecordDamaged]:
        """Every damaged record the cell table met, in order."""
        return [r for _, r in sorted(self.cells().items()) if isinstance(r, RecordDamaged)]

    def _cells_one_by_one(self, start: int) -> dict[int, CellRecord | ViewError]:
        """The records from ``start`` on when SQLite cannot read them in one go (damaged
        pages): each one that reads is a cell as usual, each one that does not is the error
        naming it. Records up to the highest seq SQLite or the latest checkpoint knows of."""
        def last(c: sqlite3.Connection) -> int:
            return int(c.execute("SELECT MAX(seq) FROM records").fetchone()[0] or 0)
        try:
            top = self.run(last)
        except ViewError:
            top = 0
        try:
            size = int((self.latest_checkpoint() or {}).get("checkpoint", {}).get("size", 0))
        except (ViewError, ValueError, TypeError, AttributeError):
            size = 0
        out: dict[int, CellRecord | ViewError] = {}
        for seq in range(start, max(top, size - 1) + 1):
            try:
                row = self.run(lambda c, n=seq: c.execute(  # type: ignore[misc]
                    "SELECT body, leaf FROM records WHERE seq = ?", (n,)).fetchone())
            except ViewError as e:
                out[seq] = RecordDamaged(f"record {seq} is unreadable: {e}", kind="corrupt",
                                         seq=seq)
                continue
            out[seq] = (RecordDamaged(f"record {seq} is missing (the checkpoint names {size} "
                                      "records)", kind="truncation", seq=seq)
                        if row is None else _read_cell(seq, row[0], bytes(row[1])))
        return out

    def cell(self, seq: int) -> CellRecord:
        """Record ``seq`` as a cell record.

        Raises:
            NotFound: there is no record ``seq`` (n >= 1).
            ViewError: record ``seq`` is not a cell record.
        """
        if seq not in self._cells:
            self.cells()
        if seq < 1 or seq not in self._cells:
            raise NotFound(f"no cell record {seq} in {self.path}")
        record = self._cells[seq]
        if isinstance(record, ViewError):
            raise record
        return record

    def seq_of(self, cell_id: str) -> int:
        """The record of cell ``cell_id``.

        Raises:
            RecordDamaged: the cell's record is damaged (its bytes still name the cell), or the
                cell is not among the readable records while some record is damaged (it may be
                that one): a damaged cell is named as damage, never as absent.
            NotFound: no record is, or may be, that cell.
        """
        cells = self.cells()
        for seq, record in cells.items():
            if isinstance(record, CellRecord) and record.cell_id == cell_id:
                return seq
        damaged = self.damaged()
        if damaged:
            needle = canonical_bytes(cell_id)
            for err in damaged:
                try:
                    raw = self.raw_record(err.seq).body
                except ViewError:
                    continue
                if b'"cell_id":' + needle in raw:
                    raise RecordDamaged(f"the record of cell {cell_id!r} in {self.path}: "
                                        f"{err.detail}",
                                        kind=err.kind, seq=err.seq)
            first = damaged[0]
            raise RecordDamaged(f"cell {cell_id!r} is not among the readable records of "
                                f"{self.path}; {len(damaged)} record(s) could not be read and it "
                                f"may be one of them (first: {first.detail})", kind=first.kind,
                                seq=first.seq)
        raise NotFound(f"no committed cell {cell_id!r} in {self.path}")

    def raw_record(self, seq: int) -> RawRecord:
        def q(c: sqlite3.Connection) -> list[tuple[int, bytes, bytes, bytes]]:
            rows: list[tuple[int, bytes, bytes, bytes]] = c.execute(
                "SELECT seq, body, leaf, chain FROM records WHERE seq IN (?, ?) ORDER BY seq",
                (seq - 1, seq)).fetchall()
            return rows
        rows = self.run(q)
        if not rows or rows[-1][0] != seq:
            raise NotFound(f"no record {seq} in {self.path}")
        prev = bytes(rows[0][3]) if len(rows) == 2 else bytes(32)
        _, body, leaf, chain = rows[-1]
        return RawRecord(seq, bytes(body), bytes(leaf), bytes(chain), prev)

    def leaves(self, size: int) -> list[bytes]:
        rows = self.run(lambda c: c.execute(
            "SELECT leaf FROM records WHERE seq < ? ORDER BY seq", (size,)).fetchall())
        return [bytes(r[0]) for r in rows]

    def latest_checkpoint(self) -> dict[str, Any] | None:
        row = self.run(lambda c: c.execute(
            "SELECT body FROM checkpoints ORDER BY id DESC LIMIT 1").fetchone())
        return None if row is None else dict(json.loads(row[0]))

    def blob(self, digest: str) -> bytes:
        row = self.run(lambda c: c.execute(
            "SELECT data FROM blobs WHERE digest = ?", (digest,)).fetchone())
        if row is None:
            raise NotFound(f"no blob {digest} in {self.path}")
        data = bytes(row[0])
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise ViewError(f"blob {digest} does not hash to its digest (run the full verify)")
        return data

    def blob_json(self, digest: str | None) -> JsonValue:
        """The JSON document in blob ``digest``; None without a digest or a blob."""
        if not digest:
            return None
        try:
            doc: JsonValue = json.loads(self.blob(digest))
        except NotFound:
            return None
        return doc

    def attempt_count(self) -> int:
        return int(self.run(lambda c: c.execute(
            "SELECT COUNT(*) FROM attempts WHERE kind = 'begin'").fetchone()[0]))

    # ---- verification --------------------------------------------------------------------

    def version(self) -> tuple[object, ...]:
        """Changes whenever the store's files do (for caching answers about the whole store)."""
        wal = self._wal()
        w = wal.stat() if wal.exists() else None
        return (*self._stat(), None if w is None else (w.st_size, w.st_mtime_ns))

    def verify_cached(self) -> StoreReport:
        """The quick verification, repeated only when the store's files changed."""
        key = self.version()
        cached = self._quick
        if cached is None or cached[0] != key:
            cached = (key, self.verify(full=False))
            self._quick = cached
        return cached[1]

    def _verify_live(self, full: bool) -> StoreReport:
        """Verify in place while a writer may be appending. The external checkpoint file is
        read beside the database, so a cell committed between the two reads can make it look
        newer than the records read (truncation) for an instant; such an answer is only
        believed when it repeats on a store that stopped changing."""
        rep = verify_store(self.path, full=full)
        for _ in range(5):
            if rep.ok or rep.damage not in _RACY:
                return rep
            key = self.version()
            time.sleep(0.2)
            if self.version() == key:
                return verify_store(self.path, full=full)
            rep = verify_store(self.path, full=full)
        return rep

    def verify(self, *, full: bool) -> StoreReport:
        """``runner.store.verify_store`` without touching the store's files.

        While a writer has the store open (a ``-wal`` exists) the verifier reads it in place
        read-only, as any reader does. Otherwise a read-only connection would create ``-wal``
        and ``-shm`` files, so the (fully checkpointed) file is copied and the copy verified
        against the store's own external checkpoint.
        """
        with self._lock:
            ext = checkpoint_path(self.path)
            if self._wal().exists():
                return self._verify_live(full)
            with tempfile.TemporaryDirectory(prefix="ect-view-") as tmp:
                before = self._stat()
                copy = Path(tmp) / self.path.name
                shutil.copyfile(self.path, copy)
                if self._wal().exists() or self._stat() != before:
                    return self._verify_live(full)
                cp = Path(tmp) / ext.name
                if ext.exists():
                    shutil.copyfile(ext, cp)
                rep = verify_store(copy, full=full, checkpoint=cp)
                return dataclasses.replace(rep, detail=rep.detail.replace(str(copy),
                                                                          str(self.path)))
