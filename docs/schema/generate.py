"""Regenerate the published JSON Schemas (2020-12) of the ECT wire formats.

The schemas are generated from the msgspec structs in ``runner/ect/_structs.py`` (the same
types the fast decoder uses, generated from the records of ``runner/ect/_wire.py``), then written twice: here (``docs/schema/``) for readers and
non-Python implementations, and as package data (``runner/ect/schema/``) so that
``runner.ect.load_schema(name)`` works from an installed wheel. Run
``python docs/schema/generate.py`` from the repository root; ``--check`` exits 1 when a
committed file differs from what this script writes (tests/ect/test_schema.py runs it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runner.ect import json_schemas

HERE = Path(__file__).resolve().parent
TARGETS = (HERE, HERE.parent.parent / "runner" / "ect" / "schema")


def render() -> dict[str, bytes]:
    return {
        f"{name}.schema.json": (
            json.dumps(schema, indent=2, ensure_ascii=False) + "\n"  # noqa: TID251 - display
        ).encode("utf-8")
        for name, schema in json_schemas().items()
    }


def main(argv: list[str]) -> int:
    files = render()
    stale = []
    for target in TARGETS:
        for name, data in files.items():
            path = target / name
            if "--check" in argv:
                if not path.exists() or path.read_bytes() != data:
                    stale.append(str(path))
            else:
                path.write_bytes(data)
    if stale:
        print("stale (run python docs/schema/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
