"""Canonical JSON (RFC 8785), domain-separated digests and strict JSON parsing (DESIGN §3.1).

Everything that is hashed or signed goes through :func:`canonical_bytes` and :func:`digest`;
nothing in digest code calls ``json.dumps``.
"""

from runner.canonical._digest import DOMAINS, Domain, digest, digest_bytes, is_digest
from runner.canonical._jcs import canonical_bytes
from runner.canonical._read import (
    MAX_TOML_BYTES,
    InputRefused,
    check_depth,
    loads_toml,
    read_bounded,
)
from runner.canonical._strict import MAX_DEPTH, MAX_INPUT_BYTES, load_strict_file, loads_strict

__all__ = [
    "DOMAINS",
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_TOML_BYTES",
    "Domain",
    "InputRefused",
    "canonical_bytes",
    "check_depth",
    "digest",
    "digest_bytes",
    "is_digest",
    "load_strict_file",
    "loads_strict",
    "loads_toml",
    "read_bounded",
]
