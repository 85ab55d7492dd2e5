"""The HTML reports' legend (what C0, each fault of the registry and the reason families mean)
and the links from their heat maps to ``ect view`` (the viewer's default address)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from runner.worlds import FAULTS

__all__ = [
    "CONDITION_CODES",
    "REASON_FAMILIES",
    "VIEWER_URL",
    "legend_html",
    "static_viewer_link",
    "viewer_link",
]

# The address `ect view` listens on by default (runner.cli's DEFAULT_PORT).
VIEWER_URL = "http://127.0.0.1:8765/"

CLEAN_LEGEND = "clean: a supported certificate, nothing wrong (the right decision is complete)"

CONDITION_CODES: tuple[tuple[str, str], ...] = (
    ("C0", CLEAN_LEGEND),
    *((f.code, f.legend()) for f in FAULTS),
)
"""The legend's condition rows: C0, then every fault of the registry (``runner.worlds.FAULTS``)
in its order, with the line its operator gives."""

REASON_FAMILIES: tuple[tuple[str, str], ...] = (
    ("adapter", "the inputs themselves are malformed (JSON, contract, ledger, certificate)"),
    ("binding", "certificate, contract and ledger do not belong together (task, ledger digest)"),
    ("coverage", "a required slot is missing, duplicated or not required"),
    ("evidence", "a cited receipt is unknown, failed, invalid, altered or conflicting"),
    ("scope", "a cited receipt is outside the slot's entity, attribute, level, dates or "
              "cardinality"),
    ("transform", "the declared op is unknown, badly parameterised or not permitted"),
    ("replay", "recomputing the claimed value from the cited receipts does not reproduce it"),
    ("internal", "the verifier failed internally and failed closed (continue)"),
    ("critic / controller / ect", "codes of the termination pipelines themselves (a critic's "
                                  "verdict, a controller's recovery, ECT's needs_human)"),
)


def viewer_link(**filters: str) -> str:
    """A link to the viewer's cell table filtered as given (``ect view`` on its default port)."""
    return VIEWER_URL + "#/cells?" + urlencode(sorted(filters.items()))


def static_viewer_link(condition: str) -> str:
    """A link to the static-study viewer's snapshots of one condition (``ect view --static``)."""
    return VIEWER_URL + "#/?" + urlencode({"q": "/" + condition})


def legend_html() -> str:
    rows = "".join(f"<tr><th>{escape(c)}</th><td>{escape(t)}</td></tr>"
                   for c, t in (*CONDITION_CODES, *REASON_FAMILIES))
    return (
        "<h2>Legend</h2><table><tbody>" + rows + "</tbody></table>"
        '<p class="note">A reason code reads <code>family.detail</code> (for example '
        "<code>scope.cardinality</code>). Heat-map cells link to the viewer: run "
        "<code>ect view --store STORE</code> for the closed-loop study's trajectories or "
        "<code>ect view --static DIR</code> for the static study's snapshots (it listens on "
        f"{escape(VIEWER_URL)} by default), then click a cell.</p>"
    )
