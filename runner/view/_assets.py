"""The page, script and stylesheet the viewer serves and bundles (hand-written, no build step,
no external fonts or CDNs: everything the page needs is in ``runner/view/static``)."""

from __future__ import annotations

from html import escape
from pathlib import Path

__all__ = ["ASSETS", "index_html"]

_DIR = Path(__file__).resolve().parent / "static"
ASSETS: dict[str, tuple[Path, str]] = {
    "app.js": (_DIR / "app.js", "text/javascript; charset=utf-8"),
    "app.css": (_DIR / "app.css", "text/css; charset=utf-8"),
}


def index_html(mode: str, *, title: str = "ect view") -> str:
    """The single page; ``mode`` tells the script where its data comes from
    (``server-store``, ``server-static``, ``bundle-store`` or ``bundle-static``)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="assets/app.css">'
        "</head>"
        f'<body data-mode="{escape(mode)}">'
        '<header id="top"><a class="brand" href="#/">ect view</a>'
        '<nav id="nav" aria-label="pages"></nav><span id="live" aria-live="polite"></span></header>'
        '<div id="banner" role="note"></div>'
        '<main id="main" tabindex="-1"><p>Loading…</p></main>'
        '<footer id="keys">Keys: <kbd>r</kbd> run · <kbd>c</kbd> cells · <kbd>/</kbd> filter · '
        "<kbd>↑</kbd>/<kbd>↓</kbd> or <kbd>j</kbd>/<kbd>k</kbd> move · <kbd>Enter</kbd> open · "
        "<kbd>[</kbd>/<kbd>]</kbd> previous/next cell · <kbd>v</kbd> pipelines side by side · "
        "<kbd>Esc</kbd> back to the table</footer>"
        '<script src="assets/app.js"></script>'
        "</body></html>\n"
    )
