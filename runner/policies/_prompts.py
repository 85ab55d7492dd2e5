"""Frozen prompt files and their digests (docs/protocol.md: prompts are hashed into the study lock).

A prompt's digest is ``"sha256:" + sha256(file bytes)``: a plain file hash, checkable with
``sha256sum``, because prompts are text files rather than JSON objects.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from runner.canonical import raw_digest
from runner.policies._registry import prompt_names

__all__ = ["PROMPT_NAMES", "load_prompt", "prompt_digests"]

# The frozen prompt set, in name order: the planner's and each critic's in the pipeline table.
# Adding or renaming one is a protocol change (the lock pins this set).
PROMPT_NAMES: tuple[str, ...] = prompt_names()


@cache
def _prompt_bytes(name: str) -> bytes:
    known = prompt_names()
    if name not in known:
        raise ValueError(f"unknown prompt {name!r}; known: {', '.join(known)}")
    return resources.files("runner.policies").joinpath("prompts", f"{name}.txt").read_bytes()


def load_prompt(name: str) -> str:
    """The text of the frozen prompt ``name`` (one of :data:`PROMPT_NAMES`)."""
    return _prompt_bytes(name).decode("utf-8")


def prompt_digests() -> dict[str, str]:
    """``{name: "sha256:<hex of the file bytes>"}`` for every frozen prompt, in name order."""
    return {n: raw_digest(_prompt_bytes(n)) for n in prompt_names()}
