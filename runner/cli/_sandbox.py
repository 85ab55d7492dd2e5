"""``ect sandbox``: run a command under the worker sandbox, run the denial probes, show the pins."""

from __future__ import annotations

import sys

import click

from runner.cli._common import EXIT_NEGATIVE, EXIT_OK, map_errors
from runner.cli._params import SANDBOX_BACKENDS, FiniteFloatRange

__all__ = ["COMMANDS", "sandbox_group"]


_backend_option = click.option(
    "--backend",
    type=SANDBOX_BACKENDS,
    default=None,
    help="Sandbox backend (default: bwrap on Linux, sandbox-exec on macOS). Never none.",
)
_weaker_option = click.option(
    "--allow-weaker-landlock-unsafe",
    is_flag=True,
    help="Linux: accept a kernel on which a promised guarantee has no layer left (no Landlock: "
    "exec from the scratch /tmp is not refused). Weaker; recorded in --json and the run header.",
)
_abi_option = click.option(
    "--landlock-abi",
    "landlock_abi",
    type=click.IntRange(min=0, max=64),
    default=None,
    help="Linux: apply this older Landlock ABI's rule set (capped at the kernel's), to see what a "
    "host with that kernel gets, e.g. 1 for Ubuntu 22.04, 2 for Debian 12, 4 for Ubuntu 24.04.",
)


def _backend(name: str | None, weaker: bool, landlock_abi: int | None = None):  # type: ignore[no-untyped-def]
    from runner.sandbox import select_backend

    options: dict[str, object] = {"allow_weaker_landlock_unsafe": True} if weaker else {}
    if landlock_abi is not None:
        options["emulate_landlock_abi"] = landlock_abi
    return select_backend(name, **options)


@click.group("sandbox")
def sandbox_group() -> None:
    """The deny-default sandbox every synthetic tool call runs in (docs/sandbox.md)."""


@sandbox_group.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--timeout", "timeout", type=FiniteFloatRange(min=0.1, max=86400.0), default=10.0, show_default=True,
              help="Wall-clock limit in seconds; the whole process group is killed at the deadline.")  # fmt: skip
@click.option("--output-cap", "output_cap", type=click.IntRange(min=1), default=None,
              show_default="the tools' own limit, 4 MiB",
              help="Bytes of stdout+stderr kept before the run is killed.")  # fmt: skip
@_backend_option
@_weaker_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@map_errors()
def run_command(
    timeout: float,
    output_cap: int | None,
    backend: str | None,
    allow_weaker_landlock_unsafe: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND under the same policy the tools get (for debugging profiles).

    Use `--` before the command, for example:

    \b
        $ ect sandbox run -- sh -c 'id; echo scratch > /tmp/x; cat /tmp/x'

    The sandbox has a private /tmp; the host's / is not readable. Standard input is passed
    through when it is not a terminal. The exit code is the command's; a command killed by a
    signal exits 128+N; a kill for timeout, CPU or output cap is reported on stderr.
    """
    from runner.sandbox import Limits

    be = _backend(backend, allow_weaker_landlock_unsafe)
    stdin = b"" if sys.stdin.isatty() else sys.stdin.buffer.read()
    limits = (Limits(wall_s=timeout) if output_cap is None
              else Limits(wall_s=timeout, output_bytes=output_cap))
    result = be.run(list(command), stdin=stdin, limits=limits)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(result.stderr)
    if result.kill_reason is not None:
        click.echo(
            f"ect: sandboxed command killed ({result.kill_reason}) after {result.wall_s:.2f}s",
            err=True,
        )
    if result.exit_status is not None:
        sys.exit(result.exit_status)
    sys.exit(128 + (result.term_signal or 9))


@sandbox_group.command("probe")
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@_backend_option
@_weaker_option
@_abi_option
@map_errors()
def probe_command(as_json: bool, backend: str | None, allow_weaker_landlock_unsafe: bool,
                  landlock_abi: int | None) -> None:  # fmt: skip
    """Run every denial probe of preflight/probes.toml inside the sandbox.

    Prints probe, expected, observed and pass; exits 1 if any probe fails, 5 if the sandbox
    cannot run here (for example a host that forbids unprivileged user namespaces).
    """
    from runner.sandbox import pins_digest, run_probes

    be = _backend(backend, allow_weaker_landlock_unsafe, landlock_abi)
    results = run_probes(be)
    ok = all(r.passed for r in results)
    if as_json:
        import json

        doc = {
            "backend": be.describe(),
            "pins_digest": pins_digest(),
            "passed": ok,
            "probes": [r.to_json() for r in results],
        }
        click.echo(json.dumps(doc, indent=2, sort_keys=True))  # noqa: TID251 (display only)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"sandbox probes ({be.name})", title_justify="left")
        for col in ("probe", "expected", "observed", "pass"):
            table.add_column(col)
        for r in results:
            mark = "[green]pass[/]" if r.passed else "[bold red]FAIL[/]"
            table.add_row(
                r.name, r.expected, r.observed + (f" ({r.detail})" if r.detail else ""), mark
            )
        console = Console(highlight=False, width=120)
        console.print(table)
        failed = sum(not r.passed for r in results)
        console.print(f"{len(results) - failed}/{len(results)} probes passed", markup=False)
    sys.exit(EXIT_OK if ok else EXIT_NEGATIVE)


@sandbox_group.command("pins")
@click.option("--write", "write", is_flag=True,
              help="After a deliberate policy edit: recompile the seccomp filters and rewrite PINS.")  # fmt: skip
@map_errors()
def pins_command(write: bool) -> None:
    """Verify every pinned policy file against sandbox_profiles/PINS and print the digests.

    Exits 3 naming the file and both digests if any bytes differ from their pin.
    """
    from runner.sandbox import pins_digest, verify_pins, write_pins

    pins = write_pins() if write else verify_pins()
    for rel, sha in pins.items():
        click.echo(f"{sha}  {rel}")
    click.echo(f"pins digest: {pins_digest()}")


COMMANDS: list[click.Command] = [sandbox_group]
