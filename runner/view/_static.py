"""The viewer over ``ect static`` output: per snapshot its contract, ledger and certificate and
each policy's decision with its reason codes.

``decisions.jsonl`` (written by ``ect static``) holds the decisions; the snapshots themselves are
not in the output directory, so they are rebuilt from ``runner.worlds.static_grid()`` (they are
deterministic and pinned by the worlds' task manifest) and matched by ``snapshot_id``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.view._errors import NotFound, ViewError

if TYPE_CHECKING:
    from runner.worlds import Snapshot

__all__ = ["StaticStudy"]


class StaticStudy:
    """An ``ect static`` output directory, read only."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        decisions = self.dir / "decisions.jsonl"
        results = self.dir / "results.json"
        if not decisions.is_file() or not results.is_file():
            raise ViewError(f"{self.dir}: not an `ect static` output directory "
                            "(needs decisions.jsonl and results.json)")
        try:
            self.results = json.loads(results.read_bytes())
            self.rows = [json.loads(line) for line in decisions.read_bytes().splitlines()
                         if line.strip()]
        except (ValueError, OSError) as e:
            raise ViewError(f"{self.dir}: unreadable static study output ({e})") from e
        ids: list[str] = []
        for r in self.rows:
            if r.get("snapshot_id") not in ids:
                ids.append(str(r.get("snapshot_id")))
        self.snapshot_ids = ids
        self._grid: dict[str, Snapshot] | None = None

    def summary(self) -> dict[str, Any]:
        prov = self.results.get("provider", {})
        arms: list[str] = []
        table: dict[str, dict[str, Any]] = {}
        for r in self.rows:
            if r.get("ablate"):
                continue
            arm = str(r.get("arm"))
            if arm not in arms:
                arms.append(arm)
            entry = table.setdefault(str(r["snapshot_id"]), {
                "snapshot_id": r["snapshot_id"], "task_id": r.get("task_id"),
                "family": r.get("family"), "world_id": r.get("world_id"),
                "split": r.get("split"), "condition": r.get("condition"),
                "gold": r.get("gold"), "decisions": {}})
            entry["decisions"][arm] = r.get("decision")
        return {
            "directory": str(self.dir),
            "provider_line": self.results.get("provider_line"),
            "simulated": bool(prov.get("simulated")),
            "h1": self.results.get("h1"),
            "arms": arms,
            "snapshots": [dict(table[s], index=i) for i, s in enumerate(self.snapshot_ids)
                          if s in table],
        }

    def snapshot(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self.snapshot_ids):
            raise NotFound(f"no snapshot {index} in {self.dir}")
        sid = self.snapshot_ids[index]
        if self._grid is None:
            from runner.worlds import static_grid

            self._grid = {s.snapshot_id: s for s in static_grid()}
        snap = self._grid.get(sid)
        return {
            "index": index,
            "snapshot_id": sid,
            "contract": None if snap is None else snap.task.contract.to_json(),
            "snapshot": None if snap is None else snap.to_json(),
            "decisions": [r for r in self.rows if r.get("snapshot_id") == sid],
            "rebuilt": snap is not None,
        }
