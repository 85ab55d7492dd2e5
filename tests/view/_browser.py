"""Playwright driving Debian's headless Chromium (never Playwright's own browser download)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextmanager
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail("headless Chromium is missing: run `make sysdeps-test` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def png_stats(path: Path) -> tuple[int, int, int, float]:
    """(width, height, distinct byte values, share of non-white bytes) of a PNG's pixel data
    (filter bytes included; enough to tell a blank page from a rendered one)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    return width, height, len(set(raw)), sum(1 for b in raw[::7] if b not in (0, 255)) / len(raw[::7])
