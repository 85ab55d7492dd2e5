"""``ect verify``: the ECT verifier on three JSON files (docs/formats.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runner.cli._common import EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE, die

if TYPE_CHECKING:  # the verifier is imported by the command itself: `ect --help` stays fast
    from runner.ect import Check, Decision

__all__ = ["COMMANDS", "verify_command"]


COMPILED_FROM_BYTES = 256 * 1024
"""From this size of the three files together, ``ect verify`` decodes them with the compiled
(msgspec) parser; below it, with the pure-Python reference parser, which decides identically and
on small files finishes before msgspec would have loaded (docs/formats.md, "Bounds")."""

MAX_VERIFY_INPUT_BYTES = 16 * 1024 * 1024
"""Each of the three files ``ect verify`` reads is at most 16 MiB (docs/formats.md, "Bounds"):
that bounds the verifier's time and memory on hostile input. A larger file is malformed input
(``continue``, exit 1); a FIFO or device is never read (exit 2)."""


def _read(path: Path, what: str) -> bytes | None:
    """The file's bytes; None when it is over the size cap."""
    from runner.canonical import InputRefused, read_bounded

    if str(path) == "-":  # standard input, as `ect digest` reads it
        data = sys.stdin.buffer.read(MAX_VERIFY_INPUT_BYTES + 1)
        return None if len(data) > MAX_VERIFY_INPUT_BYTES else data
    try:
        return read_bounded(path, limit=MAX_VERIFY_INPUT_BYTES, what=f"{what} file")
    except InputRefused as e:
        if e.too_large:
            return None
        die(str(e), EXIT_USAGE)
    except OSError as e:
        die(f"cannot read {what} file {path}: {e.strerror or type(e).__name__}", EXIT_USAGE)
    raise AssertionError("unreachable: die exits")


def _oversized(decision: Decision, names: list[str]) -> Decision:
    """The decision with each oversized input's parse reason saying why it was not parsed."""
    from runner.ect import Decision, Reason

    reasons = []
    for r in decision.reasons:
        name = r.detail.split(":", 1)[0]
        if r.code == "adapter.malformed_json" and name in names:
            r = Reason(r.code, r.slot, f"{name}: file larger than {MAX_VERIFY_INPUT_BYTES} bytes; "
                       "not parsed")
        reasons.append(r)
    return Decision(decision.decision, tuple(reasons), decision.missing_slots)


def _explain_table(decision: Decision, checks: list[Check]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True, highlight=False)
    table = Table(title=f"ECT verification: {decision.decision}", title_justify="left")
    for col in ("step", "family", "check", "slot", "outcome", "codes / note"):
        table.add_column(col, no_wrap=True)
    styles = {"pass": "green", "fail": "bold red", "skipped": "yellow", "ablated": "magenta"}
    for c in checks:
        table.add_row(
            c.step,
            c.family,
            c.name,
            c.slot or "-",
            f"[{styles.get(c.outcome, '')}]{c.outcome}[/]",
            "\n".join(c.codes) or c.note,
        )
    # Reason codes are identifiers people grep for: never cut or wrap them. When stderr is not
    # a terminal rich assumes 80 columns, so the table gets the width it needs (a narrow
    # terminal wraps the long lines itself, losing nothing).
    from rich.measure import Measurement

    need = Measurement.get(console, console.options.update(width=10_000), table).maximum
    if need > console.width:
        console = Console(stderr=True, highlight=False, width=need)
    console.print(table)
    for r in decision.reasons:
        console.print(
            f"- {r.code} [{r.slot or '-'}]: {r.detail}", markup=False, soft_wrap=True
        )
    if decision.missing_slots:
        console.print(
            f"missing slots: {', '.join(decision.missing_slots)}", markup=False, soft_wrap=True
        )


@click.command("verify")
@click.option(
    "--contract",
    "contract",
    required=True,
    type=click.Path(path_type=Path),
    help="Trusted contract R_t (ect.contract/1 JSON); - reads it from stdin.",
)
@click.option(
    "--ledger",
    "ledger",
    required=True,
    type=click.Path(path_type=Path),
    help="Receipt ledger E_t (ect.ledger/1 JSON); - reads it from stdin.",
)
@click.option(
    "--certificate",
    "certificate",
    required=True,
    type=click.Path(path_type=Path),
    help="Proposed certificate C_t (ect.certificate/1 JSON); - reads it from stdin.",
)
@click.option(
    "--explain", is_flag=True, help="Also print a table of every check and its outcome on stderr."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="With --explain, write the checks as one JSON object on stderr instead of a table.",
)
def verify_command(
    contract: Path, ledger: Path, certificate: Path, explain: bool, as_json: bool
) -> None:
    """Decide whether a certificate licenses `complete` (Evidence-Carrying Termination).

    Prints exactly one JSON decision object on stdout:
    {"decision", "reasons": [{"code", "slot", "detail"}], "missing_slots"}.

    \b
    Exit codes: 0 complete; 1 continue (malformed or hostile input included);
    2 usage error (missing or unreadable file).
    """
    from runner.canonical import canonical_bytes
    from runner.ect import verify_bytes

    if [str(p) for p in (contract, ledger, certificate)].count("-") > 1:
        die("at most one of --contract, --ledger and --certificate can be - (stdin)", EXIT_USAGE)
    read = [_read(p, what) for p, what in
            ((contract, "contract"), (ledger, "ledger"), (certificate, "certificate"))]
    too_big = [n for n, data in zip(("contract", "ledger", "certificate"), read, strict=True)
               if data is None]
    texts = [b"" if d is None else d for d in read]
    # The compiled parser pays for loading msgspec only on large files (same decision either way).
    decision, checks = verify_bytes(*texts, explain=explain,
                                    compiled=sum(map(len, texts)) >= COMPILED_FROM_BYTES)
    if too_big:
        decision = _oversized(decision, too_big)
    sys.stdout.write(canonical_bytes(decision.to_json()).decode("utf-8") + "\n")
    sys.stdout.flush()
    if explain:
        if as_json:
            payload = {"checks": [c.to_json() for c in checks], "decision": decision.to_json()}
            sys.stderr.write(canonical_bytes(payload).decode("utf-8") + "\n")
        else:
            _explain_table(decision, checks)
    sys.exit(EXIT_OK if decision.complete else EXIT_NEGATIVE)


COMMANDS: list[click.Command] = [verify_command]
