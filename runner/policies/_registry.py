"""The pipeline table: every closed-loop termination pipeline, and what it needs, in one place.

Each pipeline is one :class:`PipelineEntry` in :data:`PIPELINES` (docs/architecture.md, "How to
add a termination pipeline"): its name (the spec's ``policies`` and every cell's ``policy``), its
label in the reports, its factory (``"module:Class"``, imported when a cell first builds one, or
a callable), its model critic if it asks one (:class:`CriticSpec`: the view's kind, the frozen
prompt, the request's first line, and how the simulated critic answers it), and its part in the
gates (the treatment or the comparator of H2-H4). Everything that used to spell the pipelines
out reads the table instead: :func:`runner.policies.make_pipeline`, the critics' prompts and
headers, the frozen prompt set, the simulated critic, the spec's check of ``[design].policies``,
the strata's order and the analysis's labels, inventory check and gates.

:data:`PIPELINES` is a read-only view of the table: it always shows the table as it is now, so a
pipeline registered with :func:`registered` (a test's throwaway pipeline) is known everywhere
until the ``with`` block ends.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from runner.policies._errors import UnknownPolicy

if TYPE_CHECKING:
    from runner.policies._pipelines import Pipeline, PipelineParams
    from runner.providers import Provider

__all__ = [
    "CRITICS",
    "PIPELINES",
    "CriticSight",
    "CriticSpec",
    "GateRole",
    "PipelineEntry",
    "critic_spec",
    "gate_pipeline",
    "pipeline_entry",
    "prompt_names",
    "registered",
]

GateRole = Literal["treatment", "comparator"]
CriticSight = Literal["answer", "last_step", "whole_trace"]
PipelineFactory = Callable[["Provider | None", "PipelineParams"], "Pipeline"]


@dataclass(frozen=True)
class CriticSpec:
    """A model critic: ``kind`` is what its view says it is (``kind``) and what its requests'
    metadata name (``critic``); ``prompt`` is its frozen prompt
    (``runner/policies/prompts/<prompt>.txt``, pinned by the lock); ``header`` is the first line
    of its request; ``sees`` is what its view shows besides the task and the proposal
    (``answer``: nothing else; ``last_step``: the contract, the ledger and the most recent call;
    ``whole_trace``: every call). ``simulated_stuck_on_repeat``: the simulated critic answers
    ``stuck`` to a repeated last call (with ``p_stuck_on_repeat``) before it looks for
    problems."""

    kind: str
    prompt: str
    header: str
    sees: CriticSight
    simulated_stuck_on_repeat: bool = False


@dataclass(frozen=True)
class PipelineEntry:
    """One row of the pipeline table.

    ``factory`` builds a fresh pipeline for one cell from ``(provider, params)``: a
    ``"module:Class"`` string (imported by :meth:`load` only) or a callable. A pipeline with a
    ``critic`` asks a model and needs a provider; one without (ECT) calls none. ``gate`` marks
    the treatment and the comparator the gates H2-H4 compare (one pipeline each).
    """

    name: str
    label: str
    factory: str | PipelineFactory
    critic: CriticSpec | None = None
    gate: GateRole | None = None

    def load(self) -> PipelineFactory:
        """The factory (its module imported now, when it is a ``"module:Class"`` string)."""
        if not isinstance(self.factory, str):
            return self.factory
        module, _, name = self.factory.partition(":")
        loaded: PipelineFactory = getattr(importlib.import_module(module), name)
        return loaded


CRITIC_CORE = CriticSpec(
    kind="critic_core", prompt="critic_core",
    header="The agent asked to finish. Judge its proposal.", sees="last_step")
FULL_TRACE = CriticSpec(
    kind="full_trace", prompt="full_trace_critic",
    header="Judge whether the agent may stop now. The whole run follows.", sees="whole_trace",
    simulated_stuck_on_repeat=True)
SELF_CHECK = CriticSpec(
    kind="self_check", prompt="self_check",
    header="Check your own final answer before you stop.", sees="answer")

_PIPELINES = "runner.policies._pipelines"
_TABLE: dict[str, PipelineEntry] = {
    e.name: e
    for e in (
        PipelineEntry(name="critic_core", label="Critic core",
                      factory=f"{_PIPELINES}:CriticCorePipeline", critic=CRITIC_CORE),
        PipelineEntry(name="controller", label="Controller",
                      factory=f"{_PIPELINES}:ControllerPipeline", critic=CRITIC_CORE,
                      gate="comparator"),
        PipelineEntry(name="full_trace", label="Full-trace critic",
                      factory=f"{_PIPELINES}:FullTracePipeline", critic=FULL_TRACE),
        PipelineEntry(name="ect", label="ECT", factory=f"{_PIPELINES}:EctPipeline",
                      gate="treatment"),
    )
}

PIPELINES: Mapping[str, PipelineEntry] = MappingProxyType(_TABLE)
"""Every closed-loop pipeline by name, in canonical order (the paper's Table 4 order; the
schedule walks policies in the spec's order). A read-only view of the table."""

# Critics no pipeline owns (the static study's self-check) come first.
_OWN_CRITICS: tuple[CriticSpec, ...] = (SELF_CHECK,)

# The frozen prompts besides the critics': the planner's.
_OTHER_PROMPTS: tuple[str, ...] = ("planner",)


def _critics() -> dict[str, CriticSpec]:
    out = {c.kind: c for c in _OWN_CRITICS}
    for e in _TABLE.values():
        if e.critic is not None:
            out.setdefault(e.critic.kind, e.critic)
    return out


class _Critics(Mapping[str, CriticSpec]):
    """Every critic kind, read from the table each time."""

    def __getitem__(self, kind: str) -> CriticSpec:
        return _critics()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(_critics())

    def __len__(self) -> int:
        return len(_critics())


CRITICS: Mapping[str, CriticSpec] = _Critics()
"""Every critic kind (the self-check, then each pipeline's critic), live."""


def critic_spec(kind: str) -> CriticSpec:
    """The critic ``kind``.

    Raises:
        UnknownPolicy: no pipeline (nor the self-check) has that critic.
    """
    spec = _critics().get(kind)
    if spec is None:
        raise UnknownPolicy(f"unknown critic {kind!r}; known: {', '.join(_critics())}")
    return spec


def prompt_names() -> tuple[str, ...]:
    """The frozen prompt set, in name order: the planner's and every critic's."""
    return tuple(sorted({*_OTHER_PROMPTS, *(c.prompt for c in _critics().values())}))


def pipeline_entry(name: str) -> PipelineEntry:
    """The table's entry for ``name``.

    Raises:
        UnknownPolicy: no pipeline has that name (the message lists the names).
    """
    entry = _TABLE.get(name)
    if entry is None:
        raise UnknownPolicy(f"unknown pipeline {name!r}; known: {', '.join(_TABLE)}")
    return entry


def gate_pipeline(role: GateRole) -> str:
    """The name of the one pipeline the gates use as ``role``."""
    names = [e.name for e in _TABLE.values() if e.gate == role]
    if len(names) != 1:
        raise UnknownPolicy(f"the pipeline table marks {len(names)} pipelines as the {role}")
    return names[0]


@contextmanager
def registered(*entries: PipelineEntry) -> Iterator[None]:
    """Add ``entries`` to the table (after the shipped ones) for the ``with`` block, then put
    the table back as it was. A name already in the table is refused, as is a critic that
    reuses a known kind with a different spec or a gate role already taken.

    Raises:
        UnknownPolicy: an entry clashes with the table.
    """
    saved = dict(_TABLE)
    try:
        for e in entries:
            if e.name in _TABLE:
                raise UnknownPolicy(f"pipeline {e.name!r} is already registered")
            known = _critics().get(e.critic.kind) if e.critic is not None else None
            if known is not None and known != e.critic:
                raise UnknownPolicy(f"critic {known.kind!r} is already registered differently")
            if e.gate is not None and any(o.gate == e.gate for o in _TABLE.values()):
                raise UnknownPolicy(f"the {e.gate} of the gates is already registered")
            _TABLE[e.name] = e
        yield
    finally:
        _TABLE.clear()
        _TABLE.update(saved)
