"""Hash-chained, append-only run store with signed checkpoints and manifests (docs/store.md).

One SQLite file per run: records (record 0 is the header) in a hash chain, an RFC 6962 Merkle
tree over their leaves, signed checkpoints inside the file and beside it, an attempt journal
with its own chain, and content-addressed blobs. See docs/store.md for what it promises.
"""

from runner.store import merkle
from runner.store._check import HEADER_RESERVED, checkpoint_path, read_external_checkpoint
from runner.store._db import foreign_file
from runner.store._errors import (
    AttemptError,
    AttemptJournalDamaged,
    BlobCorrupt,
    BlobNotFound,
    CheckpointMissing,
    FileCorrupt,
    InsecureKeyFile,
    KeyFileError,
    ManifestInvalid,
    NotAStore,
    ProofInvalid,
    ScheduleMismatch,
    SignatureInvalid,
    StaleCheckpoint,
    StoreBusy,
    StoreDamaged,
    StoreUnavailable,
    StoreUsageError,
    TamperDetected,
    TruncationDetected,
    damage_label,
)
from runner.store._journal_row import JournalRow
from runner.store._keys import (
    generate_key,
    load_public_key,
    load_signing_key,
    public_key_path,
)
from runner.store._manifest import MANIFEST_FORMAT, ManifestCell, export_manifest, verify_manifest
from runner.store._store import DEFAULT_BUSY_TIMEOUT_S, Record, Store
from runner.store._verify import DAMAGE_KINDS, StoreReport, salvage, verify_store

__all__ = [
    "DAMAGE_KINDS",
    "DEFAULT_BUSY_TIMEOUT_S",
    "HEADER_RESERVED",
    "MANIFEST_FORMAT",
    "AttemptError",
    "AttemptJournalDamaged",
    "BlobCorrupt",
    "BlobNotFound",
    "CheckpointMissing",
    "FileCorrupt",
    "InsecureKeyFile",
    "JournalRow",
    "KeyFileError",
    "ManifestCell",
    "ManifestInvalid",
    "NotAStore",
    "ProofInvalid",
    "Record",
    "ScheduleMismatch",
    "SignatureInvalid",
    "StaleCheckpoint",
    "Store",
    "StoreBusy",
    "StoreDamaged",
    "StoreReport",
    "StoreUnavailable",
    "StoreUsageError",
    "TamperDetected",
    "TruncationDetected",
    "checkpoint_path",
    "damage_label",
    "export_manifest",
    "foreign_file",
    "generate_key",
    "load_public_key",
    "load_signing_key",
    "merkle",
    "public_key_path",
    "read_external_checkpoint",
    "salvage",
    "verify_manifest",
    "verify_store",
]
