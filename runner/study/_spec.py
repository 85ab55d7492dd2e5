"""The study spec (``schedules/v2.toml``): strict parsing into a frozen object."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from runner.canonical import MAX_TOML_BYTES, JsonObject, loads_toml, raw_digest, read_bounded
from runner.errors import EctError, FormatError, StudyError

__all__ = [
    "Budget",
    "ModelConfig",
    "SandboxLimits",
    "SpecError",
    "StudySpec",
    "load_spec",
    "recorded_spec",
    "spec_for_store",
]

STUDY_FORMAT = "ect.study/1"
MAX_SEEDS = 1000  # 24 tasks x 2 checkpoints x 1000 seeds x 4 policies = 192,000 rows


class SpecError(StudyError):
    """The study spec is missing, malformed, or has unknown or mistyped fields."""


def recorded_spec(header: JsonObject, store_path: str | Path) -> Path:
    """The study spec a store's header records (``runner.study`` writes it as ``"spec"``).

    Raises:
        SpecError: the header records none (a store not written by ``ect run``): there is no
            default to fall back to, the caller must name the spec.
    """
    from runner.study._records import RunHeader

    try:
        return Path(RunHeader.from_header(header).spec)
    except FormatError as e:
        raise SpecError(f"{store_path} records no study spec in its header; name it with "
                        f"--study ({e})") from None


def spec_for_store(store_path: str | Path, spec_path: str | Path | None = None) -> Path:
    """``spec_path`` when given, else the spec recorded in the store's header."""
    if spec_path is not None:
        return Path(spec_path)
    from runner.store import Store

    with Store.open(store_path, readonly=True) as store:
        return recorded_spec(store.header, store_path)


@dataclass(frozen=True)
class Budget:
    max_decisions: int
    max_additional_tool_calls: int
    max_tokens: int


@dataclass(frozen=True)
class ModelConfig:
    name: str
    temperature: float
    max_output_tokens: int
    timeout_s: float


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """The per-call limits of every sandboxed tool call ([sandbox])."""

    wall_s: float
    cpu_s: int
    output_bytes: int
    memory_bytes: int | None = None
    """The per-call memory limit (cgroup, root parent); ``None``: the sandbox's default."""


@dataclass(frozen=True)
class StudySpec:
    path: Path
    raw: bytes
    name: str
    worlds: tuple[str, ...]
    checkpoints: tuple[str, ...]
    seeds: int
    policies: tuple[str, ...]
    seed_root: str
    budget: Budget
    model: ModelConfig
    identical_retries_before_output: int
    price_input_per_mtok: float
    price_output_per_mtok: float
    sandbox: SandboxLimits
    simulated: JsonObject
    """The [simulated] behaviour tables, as ``runner.policies`` reads them (and the lock pins)."""

    @property
    def digest(self) -> str:
        return raw_digest(self.raw)


_TOP_KEYS = {"format", "name", "design", "budget", "model", "retry", "price", "sandbox", "simulated"}


def _table(data: JsonObject, key: str, fields: dict[str, type | tuple[type, ...]],
           *, optional: bool = False) -> JsonObject:
    table = data.get(key)
    if table is None and optional:
        return {}
    if not isinstance(table, dict):
        raise SpecError(f"spec: [{key}] table is missing")
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise SpecError(f"spec: [{key}] has unknown field {unknown[0]!r}")
    for name, typ in fields.items():
        if name not in table:
            raise SpecError(f"spec: [{key}] is missing {name!r}")
        value = table[name]
        if isinstance(value, bool) and typ is not bool:
            raise SpecError(f"spec: [{key}].{name} must be {_typename(typ)}, not a boolean")
        if not isinstance(value, typ):
            raise SpecError(f"spec: [{key}].{name} must be {_typename(typ)}")
    return table


def _typename(typ: type | tuple[type, ...]) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return typ.__name__


def _check_values(data: JsonObject, design: JsonObject, model: JsonObject,
                  price: JsonObject, sandbox: JsonObject, simulated: JsonObject) -> None:
    """Ranges and names a well-typed spec can still get wrong (each would otherwise surface
    only mid-run, after the store exists, or silently: a NaN wall clock never fires, an unknown
    world just drops out of the schedule)."""
    from runner.policies import PIPELINES, CriticBehaviour, PlannerBehaviour
    from runner.worlds import closed_loop_tasks

    if not data["name"] or not design["seed_root"]:
        raise SpecError("spec: name and [design].seed_root must not be empty")
    if design["seeds"] > MAX_SEEDS:
        raise SpecError(f"spec: [design].seeds must be at most {MAX_SEEDS}")
    known = sorted({t.world_id for t in closed_loop_tasks()})
    for w in _str_list(design, "worlds", "design"):
        if w not in known:
            raise SpecError(f"spec: [design].worlds: {w!r} is not a closed-loop world "
                            f"({', '.join(known)})")
    for pol in _str_list(design, "policies", "design"):
        if pol not in PIPELINES:
            raise SpecError(f"spec: [design].policies: unknown policy {pol!r} "
                            f"({', '.join(PIPELINES)})")
    ranges: list[tuple[str, str, float, float, bool]] = [
        # table, field, low, high, low bound open
        ("model", "temperature", 0.0, 2.0, False),
        ("model", "timeout_s", 0.0, 600.0, True),
        ("model", "max_output_tokens", 1, math.inf, False),
        ("price", "input_per_mtok", 0.0, math.inf, False),
        ("price", "output_per_mtok", 0.0, math.inf, False),
        ("sandbox", "wall_s", 0.0, 3600.0, True),
        ("sandbox", "cpu_s", 1, 3600, False),
        ("sandbox", "output_bytes", 1, math.inf, False),
    ]
    tables = {"model": model, "price": price, "sandbox": sandbox}
    for table, name, low, high, open_low in ranges:
        v = tables[table][name]
        if not math.isfinite(v) or v > high or v < low or (open_low and v == low):
            bound = "(" if open_low else "["
            raise SpecError(f"spec: [{table}].{name} must be a finite number in "
                            f"{bound}{low}, {high}], got {v!r}")
    unknown = sorted(set(simulated) - {"planner", "critic"})
    if unknown:
        raise SpecError(f"spec: [simulated] has unknown table {unknown[0]!r}")
    for key, cls in (("planner", PlannerBehaviour), ("critic", CriticBehaviour)):
        try:
            cls.from_json(simulated.get(key, {}))
        except EctError as e:
            raise SpecError(f"spec: [simulated.{key}]: {e}") from e


def _str_list(table: JsonObject, key: str, where: str) -> tuple[str, ...]:
    value = table[key]
    if not value or not all(isinstance(v, str) for v in value) or len(set(value)) != len(value):
        raise SpecError(f"spec: [{where}].{key} must be a non-empty list of distinct strings")
    return tuple(value)


def load_spec(path: str | Path) -> StudySpec:
    """Parse and validate a study spec file.

    Raises:
        SpecError: the file cannot be read or does not follow the ``ect.study/1`` format.
    """
    path = Path(path)
    try:
        raw = read_bounded(path, limit=MAX_TOML_BYTES, what="study spec")
    except OSError as e:
        raise SpecError(f"cannot read study spec {path}: {e.strerror}") from e
    except FormatError as e:
        raise SpecError(str(e)) from e
    try:
        data = loads_toml(raw, what=f"study spec {path}")
    except FormatError as e:
        raise SpecError(str(e)) from e
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise SpecError(f"spec: unknown top-level field {unknown[0]!r}")
    if data.get("format") != STUDY_FORMAT:
        raise SpecError(f"spec: format must be {STUDY_FORMAT!r}, got {data.get('format')!r}")
    if not isinstance(data.get("name"), str):
        raise SpecError("spec: name must be a string")
    design = _table(data, "design", {"worlds": list, "checkpoints": list, "seeds": int,
                                     "policies": list, "seed_root": str})
    budget = _table(data, "budget", {"max_decisions": int, "max_additional_tool_calls": int,
                                     "max_tokens": int})
    model = _table(data, "model", {"name": str, "temperature": (int, float),
                                   "max_output_tokens": int, "timeout_s": (int, float)})
    retry = _table(data, "retry", {"identical_retries_before_output": int})
    price = _table(data, "price", {"input_per_mtok": (int, float), "output_per_mtok": (int, float)})
    sandbox_data = data.get("sandbox")
    memory = sandbox_data.pop("memory_bytes", None) if isinstance(sandbox_data, dict) else None
    sandbox = _table(data, "sandbox", {"wall_s": (int, float), "cpu_s": int, "output_bytes": int})
    if memory is not None:  # optional: the per-call memory limit (cgroup, root parent)
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < (16 << 20):
            raise SpecError("spec: [sandbox].memory_bytes must be an integer >= 16777216")
        sandbox["memory_bytes"] = memory
    simulated = data.get("simulated", {})
    if not isinstance(simulated, dict):
        raise SpecError("spec: [simulated] must be a table")
    checkpoints = _str_list(design, "checkpoints", "design")
    if set(checkpoints) - {"clean", "incomplete"}:
        raise SpecError("spec: [design].checkpoints may only hold 'clean' and 'incomplete'")
    if design["seeds"] < 1:
        raise SpecError("spec: [design].seeds must be at least 1")
    if budget["max_decisions"] < 1 or budget["max_additional_tool_calls"] < 0 \
            or budget["max_tokens"] < 1:
        raise SpecError("spec: [budget] values must be positive")
    if retry["identical_retries_before_output"] not in (0, 1):
        raise SpecError("spec: [retry].identical_retries_before_output must be 0 or 1")
    _check_values(data, design, model, price, sandbox, simulated)
    return StudySpec(
        path=path,
        raw=raw,
        name=data["name"],
        worlds=_str_list(design, "worlds", "design"),
        checkpoints=checkpoints,
        seeds=design["seeds"],
        policies=_str_list(design, "policies", "design"),
        seed_root=design["seed_root"],
        budget=Budget(budget["max_decisions"], budget["max_additional_tool_calls"],
                      budget["max_tokens"]),
        model=ModelConfig(model["name"], float(model["temperature"]),
                          model["max_output_tokens"], float(model["timeout_s"])),
        identical_retries_before_output=retry["identical_retries_before_output"],
        price_input_per_mtok=float(price["input_per_mtok"]),
        price_output_per_mtok=float(price["output_per_mtok"]),
        sandbox=SandboxLimits(float(sandbox["wall_s"]), sandbox["cpu_s"], sandbox["output_bytes"],
                              sandbox.get("memory_bytes")),
        simulated=dict(simulated),
    )
