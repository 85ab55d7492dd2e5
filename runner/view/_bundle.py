"""``ect view --bundle DIR``: a self-contained static copy of the viewer (HTML, JS, CSS and the
data as ``data/NAME.js`` scripts), opened from ``file://`` with no server and no network."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.view._assets import ASSETS, index_html
from runner.view._errors import ViewError
from runner.view._model import CELL_COLUMNS, cell_rows, cell_view, run_summary
from runner.view._source import StoreSource
from runner.view._static import StaticStudy

__all__ = ["write_bundle"]


def _script(name: str, obj: object) -> bytes:
    # Display data, not hashed: json.dumps is fine here.
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), sort_keys=True)  # noqa: TID251
    return f"window.ectData({json.dumps(name)},{text});\n".encode("ascii")  # noqa: TID251


def write_bundle(out_dir: str | os.PathLike[str], *, store: str | os.PathLike[str] | None = None,
                 static_dir: str | os.PathLike[str] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> int:
    """Write the bundle into ``out_dir`` (which must not exist or be empty); returns the number
    of data files written. The store is read only (the same read-only access as the server).
    ``on_progress(done, total)`` follows the cell (or snapshot) pages as they are built."""
    def progress(done: int, total: int) -> None:
        if on_progress is not None:
            on_progress(done, total)

    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ViewError(f"{out}: exists and is not an empty directory; refusing to write into it")
    if (store is None) == (static_dir is None):
        raise ValueError("write_bundle needs exactly one of store= and static_dir=")
    data: dict[str, Any] = {}
    if store is not None:
        src = StoreSource(store)
        data["run"] = run_summary(src, integrity=src.verify(full=True))
        data["cells"] = {"columns": list(CELL_COLUMNS), "rows": cell_rows(src)}
        seqs = sorted(src.cells())
        for i, seq in enumerate(seqs, 1):
            # an unreadable record's page says which record and why, as the server's does
            try:
                data[f"cell-{seq}"] = cell_view(src, seq)
            except ViewError as e:
                data[f"cell-{seq}"] = {"error": str(e)}
            progress(i, len(seqs))
        mode = "bundle-store"
    else:
        assert static_dir is not None
        study = StaticStudy(static_dir)
        data["static"] = study.summary()
        for i in range(len(study.snapshot_ids)):
            data[f"snapshot-{i}"] = study.snapshot(i)
            progress(i + 1, len(study.snapshot_ids))
        mode = "bundle-static"
    tmp = out.with_name(out.name + ".tmp-bundle")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        (tmp / "data").mkdir(parents=True)
        (tmp / "assets").mkdir()
        (tmp / "index.html").write_text(index_html(mode), "utf-8")
        for name, (path, _media) in ASSETS.items():
            shutil.copyfile(path, tmp / "assets" / name)
        for name, obj in data.items():
            (tmp / "data" / f"{name}.js").write_bytes(_script(name, obj))
        if out.exists():
            out.rmdir()
        tmp.replace(out)
    except BaseException:
        # a full disk, an interrupt: no half-written bundle is left beside DIR
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(data)
