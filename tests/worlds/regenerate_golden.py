"""Regenerate the golden task manifest: ``python tests/worlds/regenerate_golden.py``.

Run it only when the benchmark specification changed on purpose (worlds, families, faults,
checkpoints, wire formats); commit the new golden file with that change and say why. The test
``test_manifest.py::test_regeneration_matches_golden`` fails whenever the built manifest drifts
from the committed file, so a drift without a spec change cannot pass unnoticed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden" / "task_manifest.json"


def render() -> str:
    """The golden file's exact text: the manifest and its digest, pretty-printed for diffs."""
    from runner.worlds import task_manifest, task_manifest_digest

    body = {"digest": task_manifest_digest(), "manifest": task_manifest()}
    return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=True) + "\n"  # noqa: TID251


def main() -> int:
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(render(), encoding="utf-8")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main())
