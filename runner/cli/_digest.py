"""``ect digest``: the ECT digests of a document, for agents built outside this package."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runner.cli._common import EXIT_OK, EXIT_USAGE, die

__all__ = ["COMMANDS", "digest_command"]

KINDS = ("descriptor", "ledger", "receipt", "value", "args", "response")


def _read(path: str) -> bytes:
    from runner.canonical import MAX_INPUT_BYTES

    if path == "-":
        return sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    try:
        with open(Path(path), "rb") as f:
            return f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        die(f"cannot read {path}: {e.strerror or type(e).__name__}", EXIT_USAGE)
        raise  # unreachable: die exits


@click.command("digest")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("file", type=str)
def digest_command(kind: str, file: str) -> None:
    """Print the ECT digest of one JSON document (FILE, or - for stdin).

    \b
    KIND is what the document is:
      descriptor  a task descriptor, or a contract (its descriptor is hashed):
                  the certificate's descriptor_digest (ect/task-descriptor/v1)
      ledger      an ect.ledger/1 ledger: the certificate's ledger_digest (ect/ledger/v1)
      receipt     one receipt (ect/receipt/v1)
      value       a receipt value: what its value_sha256 must be (ect/value/v1)
      args        a tool call's arguments: a receipt's args_sha256 (ect/args/v1)
      response    a tool's JSON response: a receipt's response_sha256 (ect/response/v1)

    Documents are parsed strictly (no duplicate keys, no NaN); descriptors, ledgers and
    receipts must match their format. Prints sha256:<hex> on one line.

    \b
    Exit codes: 0 printed; 2 usage error (missing file, not JSON, not a valid document).
    """
    from runner.canonical import loads_strict
    from runner.ect import (
        CONTRACT_FORMAT,
        Contract,
        Descriptor,
        Ledger,
        Receipt,
        args_digest,
        descriptor_digest,
        ledger_digest,
        receipt_digest,
        response_digest,
        value_digest,
    )
    from runner.errors import FormatError

    data = _read(file)
    try:
        obj = loads_strict(data)
        if kind == "descriptor":
            if isinstance(obj, dict) and obj.get("format") == CONTRACT_FORMAT:
                out = descriptor_digest(Contract.from_json(obj).descriptor)
            else:
                out = descriptor_digest(Descriptor.from_json(obj))
        elif kind == "ledger":
            out = ledger_digest(Ledger.from_json(obj))
        elif kind == "receipt":
            out = receipt_digest(Receipt.from_json(obj))
        elif kind == "value":
            from runner.ect import check_value

            out = value_digest(check_value(obj))
        elif kind == "args":
            out = args_digest(obj)
        else:
            out = response_digest(obj)
    except FormatError as e:
        die(f"{file}: {e}", EXIT_USAGE)
        return
    click.echo(out)
    sys.exit(EXIT_OK)


COMMANDS: list[click.Command] = [digest_command]
