"""A run store's whole header as the readers of finished stores see it (the analysis, the viewer).

A store written by ``ect run`` carries the study's header (:class:`RunHeader`, read by its
:meth:`RunHeader.from_header`, the one reader of it). ``ect report`` and ``ect view`` also read
stores that no ``ect run`` wrote (made by other tools, or by hand in tests) whose header holds
only some of the study's fields, or names its provider as an object ``{"name", "model",
"simulated"}``. :meth:`StoreHeader.from_header` reads both, strictly: a header with a
``study`` field is a run header and must be a whole one; any other header may hold only the
fields below (each of its type), and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from runner.canonical import (
    JsonObject,
    RecordFormatError,
    read_bool,
    read_digest,
    read_int,
    read_object,
    read_opt_object,
    read_opt_str,
    read_str,
)
from runner.study._records import RunHeader

__all__ = ["HeaderProvider", "StoreHeader"]


@dataclass(frozen=True, slots=True)
class HeaderProvider:
    """The provider a store's header names: always its name; whether it was simulated unless
    the header leaves that out; the model only when the header names it (``ect run`` leaves it
    to the attempt records)."""

    name: str
    simulated: bool | None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class StoreHeader:
    """Record 0 of a run store: the store's own fields and what the store was run under."""

    store_id: str | None
    public_key: str | None
    created_utc: str | None
    run: RunHeader | None
    """The study's header when ``ect run`` wrote the store (then every field below is its)."""
    study: str | None
    provider: HeaderProvider | None
    schedule_rows: int | None
    lock_digest: str | None
    lock_blob: str | None
    preflight_digest: str | None
    preflight_blob: str | None
    sandbox_layers: JsonObject | None

    _STORE: ClassVar[tuple[str, ...]] = ("store_id", "public_key", "created_utc")
    _FOREIGN: ClassVar[frozenset[str]] = frozenset({
        "provider", "simulated", "schedule_rows", "lock_digest", "lock_blob",
        "preflight_digest", "preflight_blob", "sandbox_layers"})

    @classmethod
    def from_header(cls, header: Mapping[str, object], path: str = "header") -> StoreHeader:
        """Read a store's header (``Store.header``).

        Raises:
            RecordFormatError: a field is not of its type, a run header is not a whole one,
                or a header that is not one holds a field it may not.
        """
        from runner.store import HEADER_RESERVED

        mine = {k: read_opt_str(header.get(k), f"{path}.{k}") for k in cls._STORE}
        if "study" in header:
            run = RunHeader.from_header(dict(header), path)
            return cls(
                **mine, run=run, study=run.study,
                provider=HeaderProvider(run.provider, run.simulated),
                schedule_rows=run.schedule_rows, lock_digest=run.lock_digest,
                lock_blob=run.lock_blob, preflight_digest=run.preflight_digest,
                preflight_blob=run.preflight_blob, sandbox_layers=run.sandbox_layers)
        own = {k: v for k, v in header.items() if k not in HEADER_RESERVED}
        unknown = sorted(set(own) - cls._FOREIGN)
        if unknown:
            raise RecordFormatError(path, f"unknown field {unknown[0][:60]!r} (a header with "
                                          "no 'study' field is not a run header)")

        def digest_of(key: str) -> str | None:
            return None if key not in own else read_digest(own[key], f"{path}.{key}")

        rows = own.get("schedule_rows")
        return cls(
            **mine, run=None, study=None,
            provider=_provider(own, path),
            schedule_rows=None if rows is None else read_int(rows, f"{path}.schedule_rows",
                                                             minimum=0),
            lock_digest=digest_of("lock_digest"), lock_blob=digest_of("lock_blob"),
            preflight_digest=digest_of("preflight_digest"),
            preflight_blob=digest_of("preflight_blob"),
            sandbox_layers=read_opt_object(own.get("sandbox_layers"), f"{path}.sandbox_layers"),
        )


def _provider(own: Mapping[str, object], path: str) -> HeaderProvider | None:
    """A provider name with an optional ``simulated`` flag, an object ``{name, model,
    simulated}``, or none."""
    p = own.get("provider")
    simulated = own.get("simulated")
    if isinstance(p, dict):
        if "simulated" in own:
            raise RecordFormatError(f"{path}.simulated",
                                    "is inside the provider object when the header has one")
        obj = read_object(p, f"{path}.provider", ("name", "model", "simulated"))
        return HeaderProvider(read_str(obj["name"], f"{path}.provider.name", nonempty=True),
                              read_bool(obj["simulated"], f"{path}.provider.simulated"),
                              read_str(obj["model"], f"{path}.provider.model", nonempty=True))
    flag = None if simulated is None else read_bool(simulated, f"{path}.simulated")
    if p is None:
        if flag is not None:
            raise RecordFormatError(f"{path}.simulated", "is given without a provider")
        return None
    return HeaderProvider(read_str(p, f"{path}.provider", nonempty=True), flag)
