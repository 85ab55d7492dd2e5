"""The one record mechanism (runner.canonical.JsonRecord): fields declared once, JSON derived both
ways, read strictly with errors naming the path."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from runner.canonical import (
    FLAT,
    OMIT,
    JsonObject,
    JsonRecord,
    RecordFormatError,
    canonical_bytes,
    derived,
    read_digest,
    rounded,
    sorted_map,
    spec,
)

if TYPE_CHECKING:  # a name only the type checker sees (as a lazily imported module's)
    from runner.canonical import JsonRecord as Unseen

DIGEST = "sha256:" + "ab" * 32


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, slots=True)
class Inner(JsonRecord):
    _path = "inner"

    n: int
    x: int | float


@dataclass(frozen=True, slots=True)
class Part(JsonRecord):
    a: int
    b: str


@dataclass(frozen=True, slots=True)
class Outer(JsonRecord):
    _path = "outer"

    name: str
    inner: Inner
    items: tuple[Inner, ...]
    maybe: str | None
    later: int | None = field(default=None, metadata=OMIT)
    reason: str = field(default="", metadata=spec(key="stop.reason"))
    detail: str = field(default="", metadata=spec(key="stop.detail"))
    blob: str = field(default=DIGEST, metadata=spec(read=read_digest))
    colour: Colour = Colour.RED
    notes: JsonObject = field(default_factory=dict)
    part: Part | None = field(default=None, metadata=FLAT)

    def _check(self, obj: object, path: str) -> None:
        if self.name == "bad":
            raise RecordFormatError(f"{path}.name", "must not be 'bad'")


def _outer(**kw: object) -> Outer:
    base: dict[str, object] = dict(name="n", inner=Inner(1, 2.5), items=(Inner(2, 3),),
                                   maybe=None)
    base.update(kw)
    return Outer(**base)  # type: ignore[arg-type]


def test_round_trip_keeps_bytes_and_types() -> None:
    rec = _outer(later=7, reason="done", detail="d", notes={"k": [1, 2.0]}, part=Part(1, "x"),
                 colour=Colour.BLUE)
    doc = rec.to_json()
    assert doc == {"name": "n", "inner": {"n": 1, "x": 2.5}, "items": [{"n": 2, "x": 3}],
                   "maybe": None, "later": 7, "stop": {"reason": "done", "detail": "d"},
                   "blob": DIGEST, "colour": "blue", "notes": {"k": [1, 2.0]}, "a": 1, "b": "x"}
    back = Outer.from_json(doc)
    assert back == rec
    assert canonical_bytes(back.to_json()) == canonical_bytes(doc)
    assert type(back.items[0].x) is int  # an int stays an int


def test_optional_omitted_vs_null() -> None:
    doc = _outer().to_json()
    assert "later" not in doc and "a" not in doc  # OMIT and an absent FLAT part: left out
    assert doc["maybe"] is None  # a plain optional field: written as null, required on read
    del doc["maybe"]
    with pytest.raises(RecordFormatError, match=r"^outer: missing field 'maybe'$"):
        Outer.from_json(doc)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(extra=1), r"^outer: unknown field 'extra'$"),
    (lambda d: d.pop("name"), r"^outer: missing field 'name'$"),
    (lambda d: d["inner"].update(n=True), r"^outer\.inner\.n: expected an integer, got boolean$"),
    (lambda d: d["items"][0].update(x="1"), r"^outer\.items\[0\]\.x: expected a number, got"),
    (lambda d: d["stop"].pop("detail"), r"^outer\.stop: missing field 'detail'$"),
    (lambda d: d["stop"].update(more=1), r"^outer\.stop: unknown field 'more'$"),
    (lambda d: d.update(stop=[]), r"^outer\.stop: expected an object, got array$"),
    (lambda d: d.update(blob="x"), r"^outer\.blob: expected a 'sha256:<64 lowercase hex>'"),
    (lambda d: d.update(colour="green"), r"^outer\.colour: unknown value 'green'$"),
    (lambda d: d.update(notes=None), r"^outer\.notes: expected an object, got null$"),
    (lambda d: d.update(later=None), r"^outer\.later: expected an integer, got null$"),
    (lambda d: d.update(name="bad"), r"^outer\.name: must not be 'bad'$"),
])
def test_strict_errors_name_the_path(change: object, message: str) -> None:
    doc = _outer().to_json()
    change(doc)  # type: ignore[operator]
    with pytest.raises(RecordFormatError, match=message):
        Outer.from_json(doc)


def test_not_an_object_and_caller_path() -> None:
    with pytest.raises(RecordFormatError, match=r"^inner: expected an object, got array$"):
        Inner.from_json([])
    with pytest.raises(RecordFormatError, match=r"^a\.b: missing field 'x'$"):
        Inner.from_json({"n": 1}, "a.b")


@dataclass(frozen=True, slots=True)
class Tally(JsonRecord):
    cost_usd: float = field(metadata=spec(write=rounded(3)))
    latency_s: float | None = field(metadata=spec(write=rounded(2)))
    failures: Counter[str] = field(metadata=spec(write=sorted_map))


def test_a_report_figure_is_written_rounded_and_a_tally_sorted() -> None:
    tally = Tally(1.23456, None, Counter({"timeout": 2, "http_429": 1}))
    assert tally.to_json() == {"cost_usd": 1.235, "latency_s": None,
                               "failures": {"http_429": 1, "timeout": 2}}
    assert list(tally.to_json()["failures"]) == ["http_429", "timeout"]
    back = Tally.from_json({"cost_usd": 1.5, "latency_s": 0.25, "failures": {"timeout": 3}})
    assert back.failures == Counter({"timeout": 3}) and isinstance(back.failures, Counter)
    with pytest.raises(RecordFormatError, match=r"^tally\.failures\.timeout: "):
        Tally.from_json({"cost_usd": 1, "latency_s": None, "failures": {"timeout": -1}},
                        "tally")


@dataclass(frozen=True, slots=True)
class Ping(JsonRecord):
    kind: str = field(default="ping", init=False)
    note: str


def test_a_tag_is_written_and_read_back_only_as_itself() -> None:
    assert Ping("hi").to_json() == {"kind": "ping", "note": "hi"}
    assert Ping.from_json({"kind": "ping", "note": "hi"}) == Ping("hi")
    with pytest.raises(RecordFormatError, match=r"^msg\.kind: expected 'ping', got 'pong'$"):
        Ping.from_json({"kind": "pong", "note": "hi"}, "msg")
    with pytest.raises(RecordFormatError, match=r"^msg\.kind: expected a string, got number$"):
        Ping.from_json({"kind": 1, "note": "hi"}, "msg")


@dataclass(frozen=True)
class Failures(JsonRecord):
    """A report whose computed keys sit among its fields (not after them)."""

    _path = "failures"

    attempts: int
    failed: int = derived(lambda r: sum(r.by_class.values()))
    by_class: dict[str, int] = field(metadata=spec(write=sorted_map))
    share: float | None = derived(lambda r: r.failed / r.attempts if r.attempts else None,
                                  key="stats.share", write=rounded(2))
    note: str = field(metadata=spec(key="stats.note"))
    simulated: bool = field(default=True, init=False)


def test_a_derived_key_is_written_at_its_position_and_read_back_checked() -> None:
    f = Failures(3, {"transport": 1, "model_output": 1}, "n")
    assert f.failed == 2  # a read-only attribute, computed
    assert canonical_bytes(f.to_json()) == canonical_bytes(
        {"attempts": 3, "failed": 2, "by_class": {"model_output": 1, "transport": 1},
         "stats": {"share": 0.67, "note": "n"}, "simulated": True})
    assert list(f.to_json()) == ["attempts", "failed", "by_class", "stats", "simulated"]
    assert list(f.to_json()["by_class"]) == ["model_output", "transport"]
    assert list(f.to_json()["stats"]) == ["share", "note"]
    assert Failures.from_json(f.to_json()) == f
    good = f.to_json()
    with pytest.raises(RecordFormatError, match=r"^failures\.failed: expected 2, got 3$"):
        Failures.from_json({**good, "failed": 3})
    with pytest.raises(RecordFormatError, match=r"^failures\.failed: expected an integer, got "
                                                r"boolean$"):
        Failures.from_json({**good, "failed": True})
    with pytest.raises(RecordFormatError, match=r"^failures: missing field 'failed'$"):
        Failures.from_json({k: v for k, v in good.items() if k != "failed"})
    with pytest.raises(RecordFormatError, match=r"^r\.stats\.share: expected 0\.67, got 0\.5$"):
        Failures.from_json({**good, "stats": {"share": 0.5, "note": "n"}}, "r")
    with pytest.raises(RecordFormatError, match=r"^failures\.stats: missing field 'share'$"):
        Failures.from_json({**good, "stats": {"note": "n"}})
    with pytest.raises(RecordFormatError, match=r"^failures\.simulated: expected True, got "
                                                r"False$"):
        Failures.from_json({**good, "simulated": False})


def test_a_derived_field_is_refused_on_a_slots_class() -> None:
    @dataclass(frozen=True, slots=True)
    class Slotted(JsonRecord):
        n: int
        twice: int = derived(lambda r: 2 * r.n)

    with pytest.raises(TypeError, match="without slots=True"):
        Slotted(1).to_json()


@dataclass(frozen=True, slots=True)
class Bundle(JsonRecord):
    n: int
    parts: tuple[Unseen, ...]


def test_a_field_typed_for_the_type_checker_only_is_written_by_value_and_not_read() -> None:
    b = Bundle(1, (Inner(2, 0.5),))
    assert b.to_json() == {"n": 1, "parts": [{"n": 2, "x": 0.5}]}
    with pytest.raises(TypeError, match=r"^Bundle\.parts: no reader \(name 'Unseen' is not "):
        Bundle.from_json(b.to_json())


@dataclass(frozen=True, slots=True)
class Verdict(JsonRecord):
    kinds: frozenset[str]
    detail: str = field(metadata=spec(key="stop.detail"))
    _derived = ("stop.code",)

    @property
    def stop_code(self) -> str:
        return self.detail.upper()

    def _check(self, obj: JsonObject, path: str) -> None:
        if obj["stop"]["code"] != self.stop_code:
            raise RecordFormatError(f"{path}.stop.code", "differs from stop.detail")


def test_a_set_is_written_sorted_and_a_derived_nested_key_is_written_first_and_required() -> None:
    v = Verdict(frozenset({"b", "a"}), "late")
    assert v.to_json() == {"kinds": ["a", "b"], "stop": {"code": "LATE", "detail": "late"}}
    assert list(v.to_json()["stop"]) == ["code", "detail"]
    assert Verdict.from_json(v.to_json()) == v
    with pytest.raises(RecordFormatError, match=r"^v\.stop: missing field 'code'$"):
        Verdict.from_json({"kinds": [], "stop": {"detail": "x"}}, "v")
    with pytest.raises(RecordFormatError, match=r"^v\.stop\.code: differs from stop\.detail$"):
        Verdict.from_json({"kinds": [], "stop": {"detail": "x", "code": "Y"}}, "v")
    with pytest.raises(RecordFormatError, match=r"^v\.kinds\[0\]: expected a string"):
        Verdict.from_json({"kinds": [1], "stop": {"detail": "x", "code": "X"}}, "v")


def test_a_number_field_names_a_number_when_it_gets_something_else() -> None:
    # read_number said "expected an integer, got string" for a float field
    from runner.canonical._fields import RecordFormatError, read_number

    for bad, kind in (("1.5", "string"), (True, "boolean"), (None, "null"), ([1], "array")):
        with pytest.raises(RecordFormatError, match=f"expected a number, got {kind}"):
            read_number(bad, "x.rate")
    assert read_number(2, "x") == 2 and read_number(0.5, "x") == 0.5
    with pytest.raises(RecordFormatError, match="not finite"):
        read_number(float("inf"), "x")
