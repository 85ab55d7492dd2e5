"""The study spec's optional per-call memory limit for the sandbox ([sandbox].memory_bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.study._spec import SpecError, load_spec

SPEC = Path(__file__).resolve().parents[2] / "schedules" / "v2.toml"


def test_the_study_spec_may_set_the_per_call_memory_limit(tmp_path: Path) -> None:
    base = SPEC.read_text("utf-8")
    assert "memory_bytes" not in load_spec(SPEC).sandbox  # default: runner.sandbox.Limits
    spec = tmp_path / "s.toml"
    spec.write_text(base.replace("[sandbox]\n", "[sandbox]\nmemory_bytes = 268435456\n"), "utf-8")
    assert load_spec(spec).sandbox["memory_bytes"] == 268435456
    for bad in ("4096", "true", '"1G"'):
        spec.write_text(base.replace("[sandbox]\n", f"[sandbox]\nmemory_bytes = {bad}\n"), "utf-8")
        with pytest.raises(SpecError, match="memory_bytes"):
            load_spec(spec)
