"""``ect store``: verify, inspect, prove and salvage run stores (a thin layer over runner.store)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # an annotation only: `ect --help` does not import the library
    from runner.canonical import JsonObject
    from runner.errors import EctError
    from runner.store import Record, Store
from runner.cli._common import (
    EXIT_NEGATIVE,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    die,
    map_errors,
)

__all__ = ["COMMANDS", "store_group"]


def _verify_codes() -> dict[type[EctError], int]:
    """``store verify`` answers "is this store damaged?": damage is its negative answer (1),
    where every command that reads a store is refused by it (3, the class's category)."""
    from runner.store import NotAStore, StoreDamaged

    return {StoreDamaged: EXIT_NEGATIVE, NotAStore: EXIT_USAGE}


def _emit_json(obj: JsonObject) -> None:
    from runner.canonical import canonical_bytes

    click.echo(canonical_bytes(obj).decode("utf-8"))


@click.group("store")
def store_group() -> None:
    """Verify, inspect, prove and salvage run stores (stores/*.db)."""


@store_group.command("verify")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--full",
    is_flag=True,
    help="Re-hash every body, recompute the Merkle root, "
    "check every signature, the attempt journal and every blob.",
)
@click.option(
    "--public-key",
    "public_key",
    type=click.Path(path_type=Path),
    default=None,
    help="Pin the expected public key (PEM or ed25519:<base64>); default: the header's.",
)
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="External checkpoint file to verify against (default: PATH.checkpoint).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@map_errors(_verify_codes)
def verify_cmd(
    path: Path, full: bool, public_key: Path | None, checkpoint: Path | None, as_json: bool
) -> None:
    """Verify the store at PATH. Exit 0 only when intact, 1 on damage, 2 on usage errors
    (no such file, a directory, a file that is not an ect run store).

    A failure names the first bad sequence number and the kind of damage.
    """
    from runner.store import foreign_file, load_public_key, verify_store

    if path.is_dir():
        die(f"{path} is a directory, not a store: give the store's file (e.g. {path}/v2.db)",
            EXIT_USAGE)
    key = load_public_key(public_key) if public_key is not None else None
    if checkpoint is not None:
        _check_checkpoint_file(checkpoint)
    report = verify_store(path, full=full, public_key=key, checkpoint=checkpoint)
    # not a damaged store but some other file: the question "is it intact" has no answer
    foreign = report.damage == "corrupt" and foreign_file(path, checkpoint)
    if report.damage == "not_a_store" or foreign:
        if as_json:  # the report still answers on stdout, as --json promises
            _emit_json({**report.to_json(), "damage": "not_a_store"})
        if foreign:
            die(f"{path}: not an ect run store (not an SQLite file, and no store checkpoint "
                "beside it)", EXIT_USAGE)
        die(report.detail if str(path) in report.detail else f"{path}: {report.detail}",
            EXIT_USAGE)
    if as_json:
        _emit_json(report.to_json())
    elif report.ok:
        click.echo(f"{path}: {report.detail}; head {report.head[1] if report.head else '-'}")
    else:
        click.echo(f"{path}: {report.label}: {report.detail}")
    raise SystemExit(EXIT_OK if report.ok else EXIT_NEGATIVE)


def _check_checkpoint_file(checkpoint: Path) -> None:
    """A ``--checkpoint`` the user named must be a checkpoint document: a missing file or one
    that is not one (notes.txt) is a usage mistake (2), not damage of the store (1). Whether
    it is signed by the store's key, and agrees with the store, is the verification's to say.
    """
    from runner.store import SignatureInvalid, read_external_checkpoint

    if not checkpoint.exists():
        die(f"--checkpoint {checkpoint}: no such file", EXIT_USAGE)
    try:
        read_external_checkpoint(checkpoint)
    except SignatureInvalid as e:
        die(f"--checkpoint {checkpoint}: not a store checkpoint document ({e})", EXIT_USAGE)


@store_group.command("show")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--seq", type=click.IntRange(min=0), default=None, help="Show record SEQ.")
@click.option("--cell", "cell_id", default=None, help="Show the record of cell CELL_ID.")
@click.option("--pretty", is_flag=True,
              help="With --seq/--cell: the trajectory step by step, blobs resolved.")
@click.option("--raw", is_flag=True, help="With --pretty: whole prompts and raw request bodies.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@map_errors()
def show_cmd(path: Path, seq: int | None, cell_id: str | None, pretty: bool, raw: bool,
             as_json: bool) -> None:
    """Show a store's header and head, or one record (the store is verified quickly first).

    With --pretty the store is only read (read-only SQLite; no verification, no writes).
    """

    if seq is not None and cell_id is not None:
        die("give at most one of --seq and --cell", EXIT_USAGE)
    if pretty or raw:
        if as_json or (raw and not pretty):
            die("--pretty cannot be combined with --json; --raw needs --pretty", EXIT_USAGE)
        if seq is None and cell_id is None:
            die("--pretty needs --seq N or --cell CELL_ID", EXIT_USAGE)
        _show_pretty(path, seq, cell_id, raw)
        return
    if cell_id is not None:
        from runner.view import StoreSource

        seq = StoreSource(path).seq_of(cell_id)
    with _open_named(path) as store:
        if seq is None:
            out: JsonObject = {
                "header": store.header,
                "records": store.count,
                "head": {"seq": store.head[0], "chain": store.head[1]},
                "attempts": len(store.attempts()),
                "orphan_attempts": _orphan_count(store),
                "latest_checkpoint": store.latest_checkpoint(),
                "provider_failures": _failure_counts(store),
                "accounting": _accounting(store),
            }
        else:
            if seq >= store.count:
                die(f"no record {seq}: the store holds {store.count} records", EXIT_USAGE)
            rec = store.record(seq)
            out = {
                "seq": rec.seq,
                "leaf": rec.leaf.hex(),
                "chain": rec.chain.hex(),
                "digest": rec.digest,
                "body": rec.body,
                "provider_failures": _record_failures(rec),
            }
    if as_json:
        _emit_json(out)
        return
    from runner.canonical import canonical_bytes

    for k, v in out.items():
        text = canonical_bytes(v).decode("utf-8") if isinstance(v, dict | list) else str(v)
        click.echo(f"{k}: {text}")


def _open_named(path: Path) -> Store:
    """``Store.open(path, readonly=True)``; damage it meets is refused naming the first bad seq
    (SQLite's own "malformed" names none: the verifier finds the record it cannot read)."""
    from runner.store import Store, StoreDamaged, verify_store

    try:
        return Store.open(path, readonly=True)
    except StoreDamaged as e:
        if e.seq is not None:
            raise
        report = verify_store(path)
        if report.ok or report.first_bad_seq is None:
            raise
        die(f"{path}: {report.label}: {report.detail}", EXIT_REFUSED)
def _failure_counts(store: Store) -> JsonObject | None:
    """The provider failures of the committed cells by class, kind, role and pipeline, and the
    cells carrying one; ``None`` for a store whose records are not cell records."""
    from runner.errors import FormatError
    from runner.study import CellRecord, FailureCounts

    counts = FailureCounts()
    try:
        for rec in store.records(1):
            counts.add(CellRecord.from_json(rec.body, f"record {rec.seq}"))
    except FormatError:
        return None
    return counts.to_json()


def _accounting(store: Store) -> JsonObject | None:
    """Every journaled provider attempt, retry, failure and halt and the billed cost, beside
    the committed cells' cost; ``None`` for a store whose records are not cell records."""
    from runner.errors import FormatError
    from runner.study import CellRecord, store_accounting

    try:
        records = [CellRecord.from_json(rec.body, f"record {rec.seq}")
                   for rec in store.records(1)]
        acc = store_accounting(store, {r.cell_id for r in records})
    except FormatError:
        return None
    if acc is None:
        return None
    out: JsonObject = dict(acc.to_json())
    out["committed_usd"] = round(sum(r.result.outcome.cost_usd for r in records), 9)
    return out


def _record_failures(rec: Record) -> list[JsonObject] | None:
    """The failed provider calls of one cell record (None: record 0 or not a cell record)."""
    from runner.errors import FormatError
    from runner.study import CellRecord, record_failures

    if rec.seq == 0:
        return None
    try:
        record = CellRecord.from_json(rec.body, f"record {rec.seq}")
    except FormatError:
        return None
    return [f.to_json() for f in record_failures(record)]


def _orphan_count(store: Store) -> int | None:
    """Attempts journaled for cells that never committed, the records read as the study's cell
    records; ``None`` for a store whose records are not cell records."""
    from runner.errors import FormatError
    from runner.study import orphan_attempts

    try:
        return len(orphan_attempts(store))
    except FormatError:
        return None


def _show_pretty(path: Path, seq: int | None, cell_id: str | None, raw: bool) -> None:
    from runner.view import NotFound, StoreSource, ViewError, cell_view, format_cell

    src = StoreSource(path)
    try:
        n = src.seq_of(cell_id) if cell_id is not None else seq
        assert n is not None
        if n == 0:
            die("record 0 is the header: use ect store show PATH", EXIT_USAGE)
        lines = format_cell(cell_view(src, n), raw=raw)
    except NotFound as e:
        die(str(e), EXIT_USAGE)
    except ViewError as e:  # the record is not a cell record
        die(str(e), EXIT_REFUSED)
    for line in lines:
        click.echo(line)


@store_group.command("proof")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--seq", type=click.IntRange(min=0), required=True, help="Record to prove.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@map_errors()
def proof_cmd(path: Path, seq: int, as_json: bool) -> None:
    """Print an RFC 9162 inclusion proof of record SEQ against the latest signed checkpoint
    (or the current tree when the checkpoint does not yet cover SEQ)."""
    from runner.store import Store

    with Store.open(path, readonly=True) as store:
        if seq >= store.count:
            die(f"no record {seq}: the store holds {store.count} records", EXIT_USAGE)
        proof = store.inclusion_proof(seq)
    if as_json:
        _emit_json(proof)
        return
    click.echo(f"seq: {proof['seq']}")
    click.echo(f"tree_size: {proof['tree_size']}")
    click.echo(f"leaf: {proof['leaf']}")
    click.echo(f"root: {proof['root']} ({'signed' if proof['checkpoint'] else 'not yet signed'})")
    for i, h in enumerate(proof["proof"]):
        click.echo(f"proof[{i}]: {h}")


@store_group.command("salvage")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option(
    "--key",
    "key_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The store's signing key: also sign a fresh checkpoint over the prefix.",
)
@map_errors(_verify_codes)
def salvage_cmd(path: Path, new: Path, key_path: Path | None) -> None:
    """Copy the verified prefix of PATH into the new store NEW (PATH is only read).

    The newest signed checkpoint the prefix still satisfies comes along; with --key a fresh
    one is signed too. Without a fitting checkpoint and without --key nothing is written.
    """
    from runner.store import load_signing_key, salvage

    n = salvage(path, new, signing_key=load_signing_key(key_path) if key_path else None)
    click.echo(f"{new}: salvaged {n} records (header included) from {path}")


@store_group.command("keygen")
@click.argument("path", type=click.Path(path_type=Path))
@map_errors()
def keygen_cmd(path: Path) -> None:
    """Create an Ed25519 signing key: PATH (private, mode 0600) and PATH.pub."""
    from runner.store import generate_key, public_key_path

    generate_key(path)
    click.echo(f"private key: {path} (0600)\npublic key: {public_key_path(path)}")


COMMANDS: list[click.Command] = [store_group]
