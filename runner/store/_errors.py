"""Errors of the run store, all under :class:`runner.errors.StoreError`::

StoreError
├── StoreBusy              another writer held the lock past the busy timeout
├── StoreUsageError        an operation the store refuses (append to a read-only view, ...)
│   └── StoreUnavailable   the file cannot be opened (permissions, read-only media with an
│                          un-checkpointed -wal): not damage, nothing was judged
├── KeyFileError           a key file is missing, malformed or not a private key
│   └── InsecureKeyFile    a private key readable by group or others (like ssh, refused)
├── BlobNotFound           no blob with that digest
├── AttemptError           attempt_end for an unknown or already ended attempt
├── ProofInvalid           a Merkle inclusion or consistency proof does not verify
├── ScheduleMismatch       export: the records are not the schedule, row for row
├── ManifestInvalid        verify_manifest: the manifest does not match the store
└── StoreDamaged           verification found damage; ``.seq`` is the first bad sequence
    ├── FileCorrupt        SQLite itself reports a malformed file
    ├── NotAStore          the file is not an ect run store (or an unknown format version)
    ├── TamperDetected     a body, leaf, chain link, row order or schema was changed
    │   ├── AttemptJournalDamaged   the same, in the attempt journal chain
    │   └── BlobCorrupt    a blob's bytes no longer match its digest
    ├── TruncationDetected fewer records (or attempts) than a signed checkpoint commits to
    ├── StaleCheckpoint    the external checkpoint is older than one the store recorded
    ├── CheckpointMissing  no external checkpoint file to verify truncation against
    └── SignatureInvalid   a checkpoint or manifest signature fails, or the key is wrong
"""

from __future__ import annotations

from runner.errors import ExitCategory, StoreError

__all__ = [
    "AttemptError",
    "AttemptJournalDamaged",
    "BlobCorrupt",
    "BlobNotFound",
    "CheckpointMissing",
    "FileCorrupt",
    "InsecureKeyFile",
    "KeyFileError",
    "ManifestInvalid",
    "NotAStore",
    "ProofInvalid",
    "ScheduleMismatch",
    "SignatureInvalid",
    "StaleCheckpoint",
    "StoreBusy",
    "StoreDamaged",
    "StoreUnavailable",
    "StoreUsageError",
    "TamperDetected",
    "TruncationDetected",
    "damage_label",
]


class StoreBusy(StoreError):
    """Another connection held the write lock longer than the busy timeout."""

    exit_category = ExitCategory.REFUSED


class StoreUsageError(StoreError):
    """The store refused an operation (no signing key for a checkpoint, a bad header, ...)."""

    exit_category = ExitCategory.USAGE


class StoreUnavailable(StoreUsageError):
    """The store file cannot be opened at all (not damage: verification never ran)."""

    exit_category = ExitCategory.USAGE


class KeyFileError(StoreError):
    """A key file is missing, malformed, of the wrong kind, or would be overwritten."""

    exit_category = ExitCategory.USAGE


class InsecureKeyFile(KeyFileError):
    """A private key file is readable or writable by group or others."""

    exit_category = ExitCategory.USAGE


class BlobNotFound(StoreError):
    """No blob with the requested digest is stored."""

    exit_category = ExitCategory.REFUSED


class AttemptError(StoreError):
    """``attempt_end`` named an attempt that does not exist or has already ended."""

    exit_category = ExitCategory.RUNTIME


class ProofInvalid(StoreError):
    """A Merkle inclusion or consistency proof does not verify."""

    exit_category = ExitCategory.NEGATIVE


class ScheduleMismatch(StoreError):
    """Manifest export: the committed records are not exactly the schedule rows, in order."""

    exit_category = ExitCategory.REFUSED


class ManifestInvalid(StoreError):
    """A manifest is malformed or does not match the store it claims to describe."""

    exit_category = ExitCategory.REFUSED


class StoreDamaged(StoreError):
    """Verification found damage. ``seq`` is the first bad sequence number (None if unknown)."""

    exit_category = ExitCategory.REFUSED

    kind = "damage"

    def __init__(self, message: str, *, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq

    @property
    def label(self) -> str:
        """``DAMAGED (kind) at seq N``: how every command names this damage."""
        return damage_label(self.kind, self.seq)


def damage_label(kind: str, seq: int | None) -> str:
    """The one way damage is named, by ``store verify``, ``store show``, the viewer and every
    command a damaged store refuses: ``DAMAGED (tamper) at seq 6``, or ``... at no single
    record`` when the damage is not in one record (a malformed file, a bad signature)."""
    where = f"seq {seq}" if seq is not None else "no single record"
    return f"DAMAGED ({kind}) at {where}"


class FileCorrupt(StoreDamaged):
    """SQLite reports the file as malformed (or it is not an SQLite file at all)."""

    exit_category = ExitCategory.REFUSED

    kind = "corrupt"


class NotAStore(StoreDamaged):
    """The file is not an ect run store of a format version this code reads: a wrong path,
    named the same way by every command (a usage error, exit 2), never as damage."""

    exit_category = ExitCategory.USAGE

    kind = "not_a_store"


class TamperDetected(StoreDamaged):
    """A record body, leaf, chain link, row order or the schema no longer verifies."""

    exit_category = ExitCategory.REFUSED

    kind = "tamper"


class AttemptJournalDamaged(TamperDetected):
    """The attempt journal's own hash chain no longer verifies."""

    exit_category = ExitCategory.REFUSED

    kind = "attempts"


class BlobCorrupt(TamperDetected):
    """A stored blob's bytes do not hash to its digest."""

    exit_category = ExitCategory.REFUSED

    kind = "blob"


class TruncationDetected(StoreDamaged):
    """The store holds fewer records or attempts than a signed checkpoint commits to."""

    exit_category = ExitCategory.REFUSED

    kind = "truncation"


class StaleCheckpoint(StoreDamaged):
    """The external checkpoint is older than a checkpoint recorded in the store (rollback)."""

    exit_category = ExitCategory.REFUSED

    kind = "stale_checkpoint"


class CheckpointMissing(StoreDamaged):
    """There is no external checkpoint file, so truncation cannot be ruled out."""

    exit_category = ExitCategory.REFUSED

    kind = "missing_checkpoint"


class SignatureInvalid(StoreDamaged):
    """A checkpoint or manifest signature does not verify, or a different key was expected."""

    exit_category = ExitCategory.REFUSED

    kind = "signature"
