"""The package as a user installs it: sdist -> wheel -> a fresh venv -> the study, outside the checkout.

The sdist and the wheel are built the way ``python -m build`` does (the wheel from the unpacked
sdist, so a file missing from the sdist is missing from the wheel) from a copy of the checkout,
with the build backend of the test extra (no isolation: no index needed). The wheel goes into a
fresh venv made with the distribution's interpreter (``/usr/bin/python3`` where it exists).

Its dependencies are the installed distributions of exactly the wheel's declared runtime
requirements and theirs (computed from the wheel's METADATA and this environment's metadata),
linked file by file from this environment: nothing else is importable there, so an undeclared
import fails as it would for a user, and pip installs the wheel with ``--no-index`` *with* its
dependency resolution (a declared requirement the venv lacks is an error). This keeps the test to
seconds instead of the minutes a download and unpack of numpy and scipy takes.
"""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.sizes import STUDY_CELLS

REPO = Path(__file__).resolve().parent.parent
DATA = ("schedules", "sandbox_profiles", "preflight")
SYSTEM_PYTHON = Path("/usr/bin/python3")
_IGNORE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__",
                                 ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
                                 "mutants", "out", "*.db", "*.db-*")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _run(argv: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600,
                          **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist then wheel (from the sdist), built from a copy of the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(REPO, src, ignore=_IGNORE)
    proc = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", base / "dist", src])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return base / "dist"


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(name))
    return [Requirement(r) for r in meta.get_all("Requires-Dist") or []]


def _closure(roots: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions the runtime requirements (no extras) pull in, transitively."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(r, "") for r in roots]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        key = _norm(req.name)
        try:
            d = found.get(key) or metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"declared requirement {req} is not installed in this environment")
        assert d.version in req.specifier or not req.specifier, (req, d.version)
        new = key not in found
        found[key] = d
        for sub in (d.requires or []) if new else []:
            todo.append((Requirement(sub), ""))
        for ex in req.extras:
            todo.extend((Requirement(sub), ex) for sub in d.requires or [])
    return list(found.values())


def _link(dists: list[metadata.Distribution], site: Path) -> int:
    """Symlink every file of ``dists`` that lives in their site-packages into ``site``."""
    n = 0
    for d in dists:
        if d.files is None:
            pytest.fail(f"{d.metadata['Name']} has no RECORD: cannot tell its files")
        root = Path(str(d.locate_file(""))).resolve()
        for f in d.files:
            if f.parts[0] == ".." or f.parts[0].endswith(".data"):
                continue  # scripts and data outside site-packages
            src = root / f
            if not src.exists():
                continue
            dst = site / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                dst.symlink_to(src)
                n += 1
    return n


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv of the distribution's python holding the wheel and its runtime closure."""
    python = SYSTEM_PYTHON if SYSTEM_PYTHON.exists() else Path(sys.executable)
    ours = ".".join(map(str, sys.version_info[:2]))
    probe = _run([python, "-c", "import sys; print(*sys.version_info[:2], sep='.')"])
    if probe.stdout.strip() != ours:
        pytest.fail(f"{python} is Python {probe.stdout.strip()}, this environment {ours}: the "
                    "dependencies' compiled parts would not load (make the venv with PY=/usr/bin/python3)")
    base = tmp_path_factory.mktemp("venv")
    env_dir = base / "venv"
    made = _run([python, "-m", "venv", "--without-pip", env_dir])
    assert made.returncode == 0, made.stderr
    site = env_dir / "lib" / f"python{ours}" / "site-packages"
    (wheel,) = dist.glob("*.whl")
    _link(_closure(_requirements(wheel)), site)
    proc = _run([sys.executable, "-m", "pip", "--python", env_dir / "bin" / "python", "install",
                 "--no-index", "--no-compile", "--progress-bar", "off", wheel])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return env_dir


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "COV_", "PYTEST"))}
    env["PATH"] = "/usr/bin:/bin"
    return env


def test_the_sdist_carries_the_study_data_and_the_license(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    import tarfile

    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for rel in ("LICENSE", "setup.py", "sandbox_profiles/PINS", "sandbox_profiles/seccomp-x86_64.bpf",
                "sandbox_profiles/seccomp-aarch64.bpf", "schedules/v2.lock.json",
                "preflight/probes.toml", "tests/test_wheel.py", "docs/store.md"):
        assert rel in names, rel


def test_the_wheel_carries_the_study_data_byte_for_byte(dist: Path) -> None:
    from runner._data import tree_digests

    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        packaged = {n.removeprefix("runner/_study/"): z.read(n) for n in names
                    if n.startswith("runner/_study/") and not n.startswith("runner/_study/runner/")}
        assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
                   for n in names)
        assert z.read("runner/_study/runner/sandbox/_worker.py") == (
            REPO / "runner/sandbox/_worker.py").read_bytes()
    import hashlib

    assert {k: hashlib.sha256(v).hexdigest() for k, v in packaged.items()} == tree_digests(REPO)


def _ect(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([venv / "bin" / "ect", *args], cwd=cwd, env=_clean_env())


@pytest.fixture(scope="module")
def outside(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[Path, dict[str, subprocess.CompletedProcess[str]]]]:
    """The three commands, run at once (each spends most of its time waiting on the probes)."""
    cwd = tmp_path_factory.mktemp("elsewhere")
    commands = {
        "demo": ("demo", "--limit", "24", "--out", "demo", "-q"),
        "probe": ("sandbox", "probe"),
        "preflight": ("preflight", "--store", "pf.db"),
    }
    with ThreadPoolExecutor(len(commands)) as pool:
        futures = {k: pool.submit(_ect, venv, cwd, *v) for k, v in commands.items()}
        yield cwd, {k: f.result() for k, f in futures.items()}


def test_the_installed_package_reads_its_own_data(venv: Path, outside: tuple[Path, object]) -> None:
    proc = _run([venv / "bin" / "python", "-c",
                 "import runner, runner._data as d; print(runner.__file__); print(d.study_root())"],
                cwd=outside[0], env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    module, root = proc.stdout.splitlines()
    site = str(venv / "lib")
    assert module.startswith(site) and root.startswith(site) and root.endswith("runner/_study")


def test_ect_demo_runs_from_the_wheel_outside_the_checkout(
        outside: tuple[Path, dict[str, subprocess.CompletedProcess[str]]]) -> None:
    cwd, results = outside
    proc = results["demo"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"smoke run (24/{STUDY_CELLS} cells)" in proc.stderr
    assert re.search(r"^ +store: demo/v2\.db$", proc.stdout, re.M), proc.stdout
    assert (cwd / "demo" / "v2.db").is_file()


def test_ect_sandbox_probe_runs_from_the_wheel(
        outside: tuple[Path, dict[str, subprocess.CompletedProcess[str]]]) -> None:
    proc = outside[1]["probe"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    m = re.search(r"^(\d+)/(\d+) probes passed$", proc.stdout, re.M)
    assert m and m[1] == m[2] and int(m[1]) > 0, proc.stdout[-2000:]


def test_ect_preflight_runs_from_the_wheel(
        outside: tuple[Path, dict[str, subprocess.CompletedProcess[str]]]) -> None:
    proc = outside[1]["preflight"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^  \[ok  \] lock: \S*/runner/_study/schedules/v2\.lock\.json", proc.stderr, re.M)
