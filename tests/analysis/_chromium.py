"""Open a report in headless Chromium: DOM dump (with the report's JS sentinel), console, screenshot."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)


@dataclass(frozen=True)
class Opened:
    dom: str
    console_errors: list[str]
    sentinel: dict[str, str]
    screenshot: Path


def _run(args: list[str], workdir: Path, name: str) -> subprocess.CompletedProcess[str]:
    profile = workdir / f"profile-{name}"  # a fresh --user-data-dir per launch
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def open_report(html: Path, workdir: Path) -> Opened:
    url = html.resolve().as_uri()
    dump = _run(["--dump-dom", url], workdir, "dom")
    shot = workdir / "report.png"
    grab = _run(["--window-size=1100,2600", f"--screenshot={shot}", url], workdir, "shot")
    console = [
        line
        for line in (dump.stderr + grab.stderr).splitlines()
        if "CONSOLE" in line or "Uncaught" in line
    ]
    m = re.search(r'<div id="sentinel"([^>]*)>', dump.stdout)
    attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', m.group(1))) if m else {}
    return Opened(dump.stdout, console, attrs, shot)
