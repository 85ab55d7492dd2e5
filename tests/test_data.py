"""runner._data: the study's data comes from the checkout when there is one, else from the package,
and a packaged copy that drifted from the checkout is refused, never silently used or ignored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import runner._data as data
from runner._data import DATA_DIRS, StudyDataDrift, checkout_root, tree_digests

REPO = Path(__file__).resolve().parent.parent


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake installed package ``runner`` at tmp_path carrying a copy of the study's data."""
    pkg = tmp_path / "runner"
    for name in DATA_DIRS:
        shutil.copytree(REPO / name, pkg / data.PACKAGED / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(data.resources, "files", lambda name: pkg)
    return pkg / data.PACKAGED


def test_a_checkout_reads_its_own_folders() -> None:
    assert checkout_root() == REPO
    assert data.study_root() == REPO
    assert {p.split("/")[0] for p in tree_digests(REPO)} == set(DATA_DIRS)
    assert "sandbox_profiles/seccomp-aarch64.bpf" in tree_digests(REPO)


def test_an_installed_package_reads_its_packaged_copy(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = _package(tmp_path, monkeypatch)
    monkeypatch.setattr(data, "checkout_root", lambda: None)
    assert data.study_root.__wrapped__() == packaged


def test_a_packaged_copy_equal_to_the_checkout_is_fine(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _package(tmp_path, monkeypatch)
    assert data.study_root.__wrapped__() == REPO


@pytest.mark.parametrize("change", ["edit", "extra", "missing"])
def test_a_packaged_copy_that_drifted_is_refused(change: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = _package(tmp_path, monkeypatch)
    target = packaged / "schedules" / "v2.toml"
    if change == "edit":
        target.write_text(target.read_text("utf-8") + "\n# edited\n", "utf-8")
    elif change == "extra":
        (packaged / "schedules" / "v3.toml").write_text("", "utf-8")
    else:
        target.unlink()
    with pytest.raises(StudyDataDrift, match=r"differs from the checkout's study files \(schedules/v"):
        data.study_root.__wrapped__()


def test_no_text_installs_the_package_from_an_index() -> None:
    # ect-runner is not on an index: `pip install 'ect-runner[view]'` would fail or, worse, fetch
    # someone else's package; the checkout's own '.[extra]' is what works
    texts = [REPO / "README.md", *REPO.glob("docs/**/*.md"), *REPO.glob("runner/**/*.py")]
    bad = [str(p.relative_to(REPO)) for p in texts if "ect-runner[" in p.read_text("utf-8")]
    assert not bad
    readme = (REPO / "README.md").read_text("utf-8")
    assert "pipx install '.[view]'" in readme and "pip install '.[view]'" in readme
    assert (REPO / "LICENSE").read_text("utf-8").split()[:3] == ["Apache", "License", "Version"]
