"""The base of the analysis's typed results: the runner's one record mechanism
(:class:`runner.canonical.JsonRecord`) read under the
path ``results`` (``results.h2.ci_pp[1]: expected an integer, got string``).

Every result of the analysis (Table 2, 3 and 4 rows, the gates, the strata, the paper-vs-run
rows, the whole ``results.json`` document) is a frozen dataclass deriving from :class:`Record`;
``OMIT``, ``FLAT`` and ``key`` are that mechanism's.
"""

from __future__ import annotations

from typing import ClassVar

from runner.canonical import FLAT, OMIT, JsonRecord, key

__all__ = ["FLAT", "OMIT", "Record", "key"]


class Record(JsonRecord):
    """A frozen dataclass that is one JSON object of the analysis's results."""

    __slots__ = ()
    _path: ClassVar[str] = "results"
    _object_error: ClassVar[str] = "expected an object"
