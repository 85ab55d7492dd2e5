"""The HTML reports' legend (what F1–F8, U1–U3, T1, C0 and the reason families mean) and the
links from their heat maps to ``ect view`` (the viewer's default address)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

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

CONDITION_CODES: tuple[tuple[str, str], ...] = (
    ("C0", "clean: a supported certificate, nothing wrong (the right decision is complete)"),
    ("F1", "completion signal without the required claims"),
    ("F2", "a relevant receipt replaced by another entity's"),
    ("F3", "a nested tool error under transport success"),
    ("F4", "the entity or date scope changed"),
    ("F5", "one required slot omitted"),
    ("F6", "a supported value altered after retrieval"),
    ("F7", "a claim cites a receipt absent from the trace"),
    ("F8", "a repeated call despite an available recovery"),
    ("U1", "closed loop, unseen: a stale receipt superseded by a later correction"),
    ("U2", "closed loop, unseen: duplicate evidence counted twice toward cardinality"),
    ("U3", "closed loop, unseen: wrong transform parameters (e.g. k)"),
    ("T1", "closed loop, trust boundary: two internally consistent but conflicting receipts "
           "(the right stop is needs_human; outside the primary scope)"),
)

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
