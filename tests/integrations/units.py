"""The toy task every adapter test runs: units sold by store S01 on three days (not a test module).

Contract: docs/integrations/units-contract.json (slots ``total`` = sum, ``days`` = count, each
over exactly the three S01 receipts). The tool ``get_units(store, date)`` returns a result that
names its own scope, so ``scoped_value()`` is the extractor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONTRACT: dict[str, Any] = json.loads((ROOT / "docs" / "integrations" / "units-contract.json").read_text())
UNITS = {
    ("S01", "2026-03-01"): 12, ("S01", "2026-03-02"): 7, ("S01", "2026-03-03"): 9,
    ("S02", "2026-03-01"): 40,
}  # fmt: skip
DAYS = ["2026-03-01", "2026-03-02", "2026-03-03"]


def units(store: str, date: str) -> dict[str, Any]:
    return {"entity": store, "attribute": "units", "level": "store", "date": date,
            "value": UNITS[(store, date)]}  # fmt: skip


def claims(ids: list[str], total: int = 28, days: int = 3, *, only_total: bool = False) -> list[Any]:
    out = [{"slot": "total", "value": total, "evidence": ids, "transform": {"op": "sum", "params": {}}}]
    if not only_total:
        out.append({"slot": "days", "value": days, "evidence": ids,
                    "transform": {"op": "count", "params": {}}})  # fmt: skip
    return out


def certificate_text(ids: list[str], **kw: Any) -> str:
    return json.dumps({"claims": claims(ids, **kw)})  # noqa: TID251 - tool-call text, not a digest


ALL = ["r-0001", "r-0002", "r-0003"]
