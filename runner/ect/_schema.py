"""Public entry points to the JSON Schemas; msgspec (in :mod:`runner.ect._structs`) loads lazily."""

from __future__ import annotations

from typing import Any

__all__ = ["json_schemas", "load_schema"]

NAMES = ("contract", "ledger", "certificate", "decision")


def json_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema (2020-12) of each wire format, generated from the wire structs.

    Keys: ``contract``, ``ledger``, ``certificate``, ``decision``. docs/schema/README.md lists
    exactly which rules of the strict parser a schema cannot state.
    """
    from runner.ect._structs import json_schemas as generate

    return generate()


def load_schema(name: str) -> dict[str, Any]:
    """The published JSON Schema of ``name`` as shipped in the package (``runner/ect/schema/``;
    a test keeps it equal to :func:`json_schemas` ``()[name]``).

    Raises:
        ValueError: ``name`` is not one of contract, ledger, certificate, decision.
    """
    if name not in NAMES:
        raise ValueError(f"no schema named {name!r}; choose from {sorted(NAMES)}")
    from importlib.resources import files

    from runner.canonical import loads_strict

    data = files("runner.ect").joinpath("schema", f"{name}.schema.json").read_bytes()
    schema: dict[str, Any] = loads_strict(data)
    return schema
