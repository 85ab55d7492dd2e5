"""``ect view``: a read-only local web viewer over a run store or ``ect static`` output.

Starlette and uvicorn (the ``view`` extra) are imported inside the command, never at import.
"""

from __future__ import annotations

from pathlib import Path

import click

from runner.cli._common import EXIT_REFUSED, EXIT_USAGE, die, map_errors

__all__ = ["COMMANDS", "DEFAULT_PORT"]

DEFAULT_PORT = 8765


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("view")
@click.option("--store", "store", type=click.Path(path_type=Path), default=None,
              help="The run store to show (opened read-only; never written, no run lock).")
@click.option("--static", "static_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Show `ect static` output (a directory) instead of a store.")
@click.option("--bundle", "bundle", type=click.Path(path_type=Path), default=None,
              help="Write a self-contained static copy into this new directory and exit.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (loopback unless --allow-remote).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: any free port). The HTML reports link to the default port.")
@click.option("--allow-remote", is_flag=True,
              help="Allow a non-loopback --host; every request then needs the printed token.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option("--quiet", "-q", is_flag=True, help="With --bundle: no progress output.")
@map_errors()
def view_cmd(store: Path | None, static_dir: Path | None, bundle: Path | None, host: str,
             port: int, allow_remote: bool, open_browser: bool, quiet: bool) -> None:
    """Look inside a run: the run, the cell table, each trajectory step by step.

    Read-only over the store (safe while `ect run` writes to it; new cells show as they
    commit). Exit 2 on usage errors, 3 when a non-loopback host is refused.
    """
    if (store is None) == (static_dir is None):
        die("give exactly one of --store PATH and --static DIR", EXIT_USAGE)
    if store is not None and not store.is_file():
        die(f"no such store: {store}", EXIT_USAGE)
    if static_dir is not None and not static_dir.is_dir():
        die(f"no such directory: {static_dir}", EXIT_USAGE)
    if bundle is not None:
        from runner.cli._progress import CountProgress
        from runner.view import write_bundle

        if not quiet:
            click.echo(f"bundle: verifying {store} in full, then writing every page"
                       if store is not None else f"bundle: writing every page of {static_dir}",
                       err=True)
        progress = CountProgress("bundle", "cell pages" if store is not None else "snapshots",
                                 enabled=not quiet)
        try:
            n = write_bundle(bundle, store=store, static_dir=static_dir, on_progress=progress)
        finally:
            progress.stop()
        click.echo(f"bundle written: {bundle / 'index.html'} ({n} data files; open it from "
                   "file://, no server or network needed)")
        return
    import secrets
    import socket

    remote = not _is_loopback(host)
    if remote and not allow_remote:
        die(f"refusing to listen on non-loopback host {host}: the viewer shows the whole store; "
            "pass --allow-remote to serve it there (a token is then required)", EXIT_REFUSED)
    try:
        import uvicorn

        from runner.view import build_app
    except ImportError as e:
        die(f"ect view needs the 'view' extra (pip install '.[view]' in the ect-runner checkout): {e}", EXIT_USAGE)
    token = secrets.token_urlsafe(24) if remote else None
    app = build_app(store=store, static_dir=static_dir, token=token,
                    allowed_hosts=("*",) if remote else ("127.0.0.1", "localhost", "[::1]"))
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)  # before the address is printed: a client may connect at once
    except OSError as e:
        sock.close()
        die(f"cannot listen on {host}:{port}: {e.strerror}", EXIT_USAGE)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
    click.echo(f"ect view: serving {store or static_dir} read-only at {url}")
    if token:
        click.echo(f"ect view: token (required on every request): {token}")
    click.echo("ect view: press Ctrl-C to stop", err=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


COMMANDS: list[click.Command] = [view_cmd]
