"""Canonical JSON (RFC 8785), domain-separated digests and strict JSON parsing (docs/formats.md §1).

Everything that is hashed or signed goes through :func:`canonical_bytes` and :func:`digest`;
nothing in digest code calls ``json.dumps``.
"""

from runner.canonical._digest import DOMAINS, Domain, digest, digest_bytes, is_digest, raw_digest
from runner.canonical._fields import (
    JsonObject,
    JsonValue,
    RecordFormatError,
    read_bool,
    read_digest,
    read_int,
    read_json_object,
    read_list,
    read_number,
    read_object,
    read_opt_digest,
    read_opt_object,
    read_opt_str,
    read_str,
)
from runner.canonical._files import Hook, atomic_write, atomic_write_all, fsync_dir
from runner.canonical._jcs import canonical_bytes
from runner.canonical._read import (
    MAX_TOML_BYTES,
    InputRefused,
    check_depth,
    loads_toml,
    read_bounded,
)
from runner.canonical._record import (
    FLAT,
    OMIT,
    Count,
    Digest,
    JsonRecord,
    NonEmptyStr,
    at_least,
    derived,
    key,
    rounded,
    sorted_map,
    spec,
)
from runner.canonical._strict import MAX_DEPTH, MAX_INPUT_BYTES, load_strict_file, loads_strict

__all__ = [
    "DOMAINS",
    "FLAT",
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_TOML_BYTES",
    "OMIT",
    "Count",
    "Digest",
    "Domain",
    "Hook",
    "InputRefused",
    "JsonObject",
    "JsonRecord",
    "JsonValue",
    "NonEmptyStr",
    "RecordFormatError",
    "at_least",
    "atomic_write",
    "atomic_write_all",
    "canonical_bytes",
    "check_depth",
    "derived",
    "digest",
    "digest_bytes",
    "fsync_dir",
    "is_digest",
    "key",
    "load_strict_file",
    "loads_strict",
    "loads_toml",
    "raw_digest",
    "read_bool",
    "read_bounded",
    "read_digest",
    "read_int",
    "read_json_object",
    "read_list",
    "read_number",
    "read_object",
    "read_opt_digest",
    "read_opt_object",
    "read_opt_str",
    "read_str",
    "rounded",
    "sorted_map",
    "spec",
]
