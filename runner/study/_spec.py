"""The study spec (``schedules/v2.toml``): strict parsing into a frozen object."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from runner.canonical import (
    MAX_TOML_BYTES,
    JsonObject,
    JsonRecord,
    at_least,
    canonical_bytes,
    loads_toml,
    raw_digest,
    read_bounded,
)
from runner.errors import EctError, ExitCategory, FormatError, StudyError

if TYPE_CHECKING:  # imported where used (keeps `ect --help` light)
    from runner.loop import StopRules
    from runner.policies import CriticBehaviour, PlannerBehaviour
    from runner.sandbox import Limits

__all__ = [
    "ON_TRANSPORT_FAILURE",
    "Budget",
    "ModelConfig",
    "ProviderSettings",
    "SandboxLimits",
    "SimulatorTables",
    "SpecError",
    "StudySpec",
    "UnknownParameter",
    "load_spec",
    "recorded_spec",
    "sandbox_limits",
    "simulator_parameters",
    "spec_for_store",
    "with_overrides",
]

STUDY_FORMAT = "ect.study/1"
MAX_SEEDS = 1000  # 24 tasks x 2 checkpoints x 1000 seeds x 4 policies = 192,000 rows


SimulatorTables = dict[str, dict[str, float]]
"""The ``[simulated]`` behaviour tables as the spec gives them: table -> parameter -> value."""


class SpecError(StudyError):
    """The study spec is missing, malformed, or has unknown or mistyped fields."""

    exit_category = ExitCategory.USAGE


def recorded_spec(header: Mapping[str, object], store_path: str | Path,
                  option: str = "--study") -> Path:
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
                        f"{option} ({e})") from None


def spec_for_store(store_path: str | Path, spec_path: str | Path | None = None, *,
                   option: str = "--study") -> Path:
    """``spec_path`` when given, else the spec recorded in the store's header, found where it
    was recorded: as is when absolute, else from the working directory, else in the study's
    own folder (the checkout or the installed wheel), so every command that takes a store works
    from any directory.

    Raises:
        SpecError: the header records no spec, or the recorded one is found nowhere (the
            message names it and where it was looked for).
    """
    if spec_path is not None:
        return Path(spec_path)
    from runner.store import Store

    with Store.open(store_path, readonly=True) as store:
        recorded = recorded_spec(store.header, store_path, option)
    return find_recorded_spec(recorded, store_path, option)


def find_recorded_spec(recorded: Path, store_path: str | Path, option: str = "--study") -> Path:
    """The spec a header records (``recorded``), looked for as :func:`spec_for_store` does."""
    if recorded.is_absolute() or recorded.exists():
        if recorded.exists():
            return recorded
        raise SpecError(f"{store_path} records study spec {recorded}, which does not exist; "
                        f"name it with {option} PATH")
    from runner import _data

    beside = _data.study_root() / recorded
    if beside.exists():
        return beside
    raise SpecError(f"{store_path} records study spec {recorded}, found neither here "
                    f"({Path.cwd()}) nor in {_data.study_root()}; name it with {option} PATH")


@dataclass(frozen=True)
class Budget:
    """The protocol's limits ([budget]): decisions and additional tool calls per trajectory."""

    max_decisions: int
    max_additional_tool_calls: int


@dataclass(frozen=True)
class ModelConfig:
    name: str
    temperature: float
    max_output_tokens: int
    timeout_s: float


ON_TRANSPORT_FAILURE: dict[str, str] = {
    "halt": "the cell is not committed; the run halts at the next cell boundary (exit 4) and "
    "`ect resume` runs the cell again from scratch",
    "record": "the failure is recorded as the call's outcome and stays in the denominator (the "
    "paper's strict reading of \"final provider failures\")",
}
"""What a run does with a transport failure that survived its single retry ([provider])."""


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """[provider] (optional): the transport-failure policy (locked) and the default throttle
    (``--requests-per-minute``/``--tokens-per-minute`` override it; it changes no result)."""

    on_transport_failure: str = "halt"
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True, slots=True)
class SandboxLimits(JsonRecord):
    """The per-call limits of every sandboxed tool call ([sandbox])."""

    wall_s: float
    cpu_s: Annotated[int, at_least(1)]
    output_bytes: Annotated[int, at_least(1)]
    memory_bytes: Annotated[int, at_least(1)] | None = None
    """The per-call memory limit (cgroup, root parent); ``None``: the sandbox's default."""


def sandbox_limits(section: SandboxLimits) -> Limits:
    """The sandbox's per-call :class:`~runner.sandbox.Limits` for a spec's ``[sandbox]``: the one
    conversion every executor uses (the local executor, and each Ray node from the section it is
    sent), so no executor can drop a limit; what the spec leaves out keeps the sandbox's default."""
    from runner.sandbox import Limits

    memory = Limits.memory_bytes if section.memory_bytes is None else section.memory_bytes
    return Limits(wall_s=section.wall_s, cpu_s=section.cpu_s,
                  output_bytes=section.output_bytes, memory_bytes=memory)


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
    stop_rules: StopRules
    """[stop_rules]: the stop controls beyond the protocol's limits (all off in the frozen study)."""
    model: ModelConfig
    identical_retries_before_output: int
    price_input_per_mtok: float
    price_output_per_mtok: float
    sandbox: SandboxLimits
    simulated: SimulatorTables
    """The [simulated] behaviour tables, as ``runner.policies`` reads them (and the lock pins)."""
    overrides: dict[str, float] = field(default_factory=dict)
    """Simulator parameters set by :func:`with_overrides` (dotted name -> value), over the file's."""
    provider: ProviderSettings = field(default_factory=ProviderSettings)
    """[provider]: the transport-failure policy and the default throttle."""

    @property
    def digest(self) -> str:
        """sha256 of the spec file's bytes; with overrides, of those bytes and the overrides
        (an overridden spec is never the frozen one, so it never matches the file's lock)."""
        if not self.overrides:
            return raw_digest(self.raw)
        return raw_digest(self.raw + b"\n# ect overrides: " + canonical_bytes(self.overrides))

    def stop_rules_in_force(self) -> JsonObject:
        """Every rule that can end one of this study's trajectories (lock and run header)."""
        from runner.loop import TrajectoryConfig, stop_rules_in_force

        return stop_rules_in_force(TrajectoryConfig(
            max_decisions=self.budget.max_decisions,
            max_additional_tool_calls=self.budget.max_additional_tool_calls,
            stop_rules=self.stop_rules))


_TOP_KEYS = {"format", "name", "design", "budget", "stop_rules", "model", "retry", "price",
             "sandbox", "simulated", "provider"}


class UnknownParameter(SpecError):
    """An override names no simulator parameter; ``valid`` lists every name there is."""

    exit_category = ExitCategory.USAGE

    def __init__(self, name: str, valid: tuple[str, ...]) -> None:
        self.name = name
        self.valid = valid
        super().__init__(f"unknown simulator parameter {name!r}; valid names: {', '.join(valid)}")


def _behaviours() -> dict[str, type[PlannerBehaviour] | type[CriticBehaviour]]:
    from runner.policies import CriticBehaviour, PlannerBehaviour

    return {"planner": PlannerBehaviour, "critic": CriticBehaviour}


def simulator_parameters(spec: StudySpec | None = None) -> dict[str, float]:
    """Every simulator parameter by its stable dotted name (``simulated.<table>.<name>``, the
    TOML path in the spec), with its value in ``spec`` (its default without one), in name order."""
    out: dict[str, float] = {}
    for table, cls in _behaviours().items():
        given = spec.simulated.get(table, {}) if spec is not None else {}
        values = cls.from_json(given).to_json()
        for name, value in values.items():
            out[f"simulated.{table}.{name}"] = value
    return dict(sorted(out.items()))


def _probability_value(name: str, value: object) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SpecError(f"simulator parameter {name}: {value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"simulator parameter {name}: expected a number in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise SpecError(f"simulator parameter {name}: {value!r} is outside [0, 1]")
    return float(value)


def with_overrides(spec: StudySpec, overrides: Mapping[str, object]) -> StudySpec:
    """``spec`` with simulator parameters replaced: ``{"simulated.planner.p_reuse_draft": 0.2}``.

    Names are those of :func:`simulator_parameters`; a value is a number (or a numeric string)
    in [0, 1]. The result records the overrides (``StudySpec.overrides``, merged over any it
    already had) and its ``digest`` covers them, so it can never pass for the frozen spec.

    Raises:
        UnknownParameter: a name is not a simulator parameter (the error lists every valid name).
        SpecError: a value is not a number in [0, 1].
    """
    valid = tuple(simulator_parameters())
    simulated = {table: dict(values) for table, values in spec.simulated.items()}
    applied: dict[str, float] = {}
    for name, value in overrides.items():
        if name not in valid:
            raise UnknownParameter(name, valid)
        _, table, param = name.split(".")
        applied[name] = simulated.setdefault(table, {})[param] = _probability_value(name, value)
    for table, cls in _behaviours().items():
        try:
            cls.from_json(simulated.get(table, {}))
        except EctError as e:
            raise SpecError(f"spec: [simulated.{table}]: {e}") from e
    merged = dict(sorted({**spec.overrides, **applied}.items()))
    return dataclasses.replace(spec, simulated=simulated, overrides=merged)


class _SpecDocument:
    """A spec's parsed TOML, read table by table (each table strictly: every field present,
    nothing extra, each of its type) into the typed values of a :class:`StudySpec`. The checks
    run in the order the tables are read, so the first problem found is the one named."""

    def __init__(self, data: JsonObject) -> None:
        self.data = data
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise SpecError(f"spec: unknown top-level field {unknown[0]!r}")
        if data.get("format") != STUDY_FORMAT:
            raise SpecError(f"spec: format must be {STUDY_FORMAT!r}, got {data.get('format')!r}")
        if not isinstance(data.get("name"), str):
            raise SpecError("spec: name must be a string")
        self.design = self.table("design", {"worlds": list, "checkpoints": list, "seeds": int,
                                            "policies": list, "seed_root": str})
        self.budget = self.table("budget", {"max_decisions": int,
                                            "max_additional_tool_calls": int})
        self.stop_rules = self.read_stop_rules()
        self.model = self.table("model", {"name": str, "temperature": (int, float),
                                          "max_output_tokens": int, "timeout_s": (int, float)})
        self.retry = self.table("retry", {"identical_retries_before_output": int})
        self.price = self.table("price", {"input_per_mtok": (int, float),
                                          "output_per_mtok": (int, float)})
        sandbox_data = data.get("sandbox")
        memory = sandbox_data.pop("memory_bytes", None) if isinstance(sandbox_data, dict) else None
        self.sandbox = self.table("sandbox", {"wall_s": (int, float), "cpu_s": int,
                                              "output_bytes": int})
        if memory is not None:  # optional: the per-call memory limit (cgroup, root parent)
            if isinstance(memory, bool) or not isinstance(memory, int) or memory < (16 << 20):
                raise SpecError("spec: [sandbox].memory_bytes must be an integer >= 16777216")
            self.sandbox["memory_bytes"] = memory
        simulated = data.get("simulated", {})
        if not isinstance(simulated, dict):
            raise SpecError("spec: [simulated] must be a table")
        self.simulated = simulated
        self.checkpoints = self.str_list("checkpoints")
        if set(self.checkpoints) - {"clean", "incomplete"}:
            raise SpecError("spec: [design].checkpoints may only hold 'clean' and 'incomplete'")
        if self.design["seeds"] < 1:
            raise SpecError("spec: [design].seeds must be at least 1")
        if self.budget["max_decisions"] < 1 or self.budget["max_additional_tool_calls"] < 0:
            raise SpecError("spec: [budget].max_decisions must be >= 1 and "
                            "max_additional_tool_calls >= 0")
        if self.retry["identical_retries_before_output"] not in (0, 1):
            raise SpecError("spec: [retry].identical_retries_before_output must be 0 or 1")
        self.check_values()

    def spec(self, path: Path, raw: bytes) -> StudySpec:
        design, model, price, sandbox = self.design, self.model, self.price, self.sandbox
        return StudySpec(
            path=path,
            raw=raw,
            name=self.data["name"],
            worlds=self.str_list("worlds"),
            checkpoints=self.checkpoints,
            seeds=design["seeds"],
            policies=self.str_list("policies"),
            seed_root=design["seed_root"],
            budget=Budget(self.budget["max_decisions"], self.budget["max_additional_tool_calls"]),
            stop_rules=self.stop_rules,
            model=ModelConfig(model["name"], float(model["temperature"]),
                              model["max_output_tokens"], float(model["timeout_s"])),
            identical_retries_before_output=self.retry["identical_retries_before_output"],
            price_input_per_mtok=float(price["input_per_mtok"]),
            price_output_per_mtok=float(price["output_per_mtok"]),
            sandbox=SandboxLimits(float(sandbox["wall_s"]), sandbox["cpu_s"],
                                  sandbox["output_bytes"], sandbox.get("memory_bytes")),
            simulated=dict(self.simulated),
            provider=self.read_provider(),
        )

    def read_stop_rules(self) -> StopRules:
        """[stop_rules] (optional; absent: every control beyond the protocol is off).

        ``no_progress`` is a boolean; ``token_ceiling`` and ``side_effect_call_limit`` are integers,
        0 meaning off (TOML has no null).
        """
        from runner.loop import StopRules

        table = self.table("stop_rules", {"no_progress": bool, "token_ceiling": int,
                                          "side_effect_call_limit": int}, optional=True)
        if not table:
            return StopRules()
        for name in ("token_ceiling", "side_effect_call_limit"):
            if table[name] < 0:
                raise SpecError(f"spec: [stop_rules].{name} must be 0 (off) or a positive integer")
        return StopRules(no_progress=table["no_progress"],
                         token_ceiling=table["token_ceiling"] or None,
                         side_effect_call_limit=table["side_effect_call_limit"] or None)

    def read_provider(self) -> ProviderSettings:
        """[provider] (optional, every field optional): ``on_transport_failure`` ("halt", the
        default, or "record"), ``requests_per_minute`` and ``tokens_per_minute`` (0 = no limit)."""
        table = self.data.get("provider")
        if table is None:
            return ProviderSettings()
        if not isinstance(table, dict):
            raise SpecError("spec: [provider] must be a table")
        unknown = sorted(set(table) - {"on_transport_failure", "requests_per_minute",
                                       "tokens_per_minute"})
        if unknown:
            raise SpecError(f"spec: [provider] has unknown field {unknown[0]!r}")
        policy = table.get("on_transport_failure", "halt")
        if policy not in ON_TRANSPORT_FAILURE:
            raise SpecError(f"spec: [provider].on_transport_failure must be one of "
                            f"{', '.join(repr(p) for p in ON_TRANSPORT_FAILURE)}, got {policy!r}")
        limits: dict[str, int | None] = {}
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = table.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(f"spec: [provider].{name} must be 0 (no limit) or a positive "
                                "integer")
            limits[name] = value or None
        return ProviderSettings(policy, limits["requests_per_minute"], limits["tokens_per_minute"])

    def table(self, key: str, fields: dict[str, type | tuple[type, ...]],
              *, optional: bool = False) -> JsonObject:
        table = self.data.get(key)
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

    def check_values(self) -> None:
        """Ranges and names a well-typed spec can still get wrong (each would otherwise surface
        only mid-run, after the store exists, or silently: a NaN wall clock never fires, an unknown
        world just drops out of the schedule)."""
        from runner.policies import PIPELINES, CriticBehaviour, PlannerBehaviour
        from runner.worlds import closed_loop_tasks

        data, design, simulated = self.data, self.design, self.simulated

        if not data["name"] or not design["seed_root"]:
            raise SpecError("spec: name and [design].seed_root must not be empty")
        if design["seeds"] > MAX_SEEDS:
            raise SpecError(f"spec: [design].seeds must be at most {MAX_SEEDS}")
        known = sorted({t.world_id for t in closed_loop_tasks()})
        for w in self.str_list("worlds"):
            if w not in known:
                raise SpecError(f"spec: [design].worlds: {w!r} is not a closed-loop world "
                                f"({', '.join(known)})")
        for pol in self.str_list("policies"):
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
        tables = {"model": self.model, "price": self.price, "sandbox": self.sandbox}
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

    def str_list(self, key: str) -> tuple[str, ...]:
        """A list of [design] (worlds, checkpoints, policies): non-empty, distinct strings."""
        value = self.design[key]
        if not value or not all(isinstance(v, str) for v in value) or len(set(value)) != len(value):
            raise SpecError(f"spec: [design].{key} must be a non-empty list of distinct strings")
        return tuple(value)


def _typename(typ: type | tuple[type, ...]) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return typ.__name__


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
    return _SpecDocument(data).spec(path, raw)
