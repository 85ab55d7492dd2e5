"""Durable file writes for the store: the one helper of :mod:`runner.canonical` (temp file ->
fsync -> rename -> fsync directory), re-exported under the names the store's modules use."""

from __future__ import annotations

from runner.canonical import Hook, atomic_write, fsync_dir

__all__ = ["Hook", "atomic_write", "fsync_dir"]
