"""Hostile input files for every command that parses one: no traceback, no hang, no unbounded
work, a documented exit code.

The hypothesis tests run the commands in-process (click's CliRunner: any exception other than
``SystemExit`` escaping a command is a failure); the FIFO, device and size cases run the shipped
CLI in a child process with a timeout, because a hang or a memory blow-up is what they guard
against.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.canonical import digest
from runner.cli import cli
from runner.store import Store, generate_key
from runner.study import SpecError, load_spec
from tests.faults import ect

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "hierarchy"

# --- generators ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@st.composite
def json_documents(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["value", "truncated", "deep", "bytes", "example"]))
    if kind == "value":
        return json.dumps(draw(json_values)).encode()  # noqa: TID251 - test input, not hashed
    if kind == "truncated":
        text = json.dumps(draw(json_values)).encode()  # noqa: TID251 - test input, not hashed
        return text[: draw(st.integers(0, len(text)))]
    if kind == "deep":
        n = draw(st.integers(60, 3000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        return (opener * n + "1" + closer * n).encode()
    if kind == "example":  # a real document with one byte changed
        data = bytearray((EXAMPLE / draw(st.sampled_from(
            ["contract.json", "ledger.json", "certificate.json"]))).read_bytes())
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
        return bytes(data)
    return draw(st.binary(max_size=200))


toml_keys = st.from_regex(r"[a-z_]{1,6}", fullmatch=True)
toml_scalars = st.sampled_from(["1", "1.5", "true", '"x"', "'y'", "1979-05-27", "[]", "{}"])


@st.composite
def toml_documents(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["lines", "deep_array", "deep_table", "dotted", "bytes",
                                 "spec"]))
    if kind == "lines":
        lines = []
        for _ in range(draw(st.integers(0, 8))):
            if draw(st.booleans()):
                lines.append(f"[{'.'.join(draw(st.lists(toml_keys, min_size=1, max_size=4)))}]")
            lines.append(f"{draw(toml_keys)} = {draw(toml_scalars)}")
        return "\n".join(lines).encode()
    if kind == "deep_array":
        n = draw(st.integers(60, 3000))
        return ("x = " + "[" * n + "]" * n).encode()
    if kind == "deep_table":
        n = draw(st.integers(60, 3000))
        return ("x = " + "{a = " * n + "1" + "}" * n).encode()
    if kind == "dotted":
        n = draw(st.integers(60, 3000))
        return ("[" + ".".join(["k"] * n) + "]\nv = 1\n").encode()
    if kind == "spec":  # the real spec with one byte changed
        data = bytearray((REPO / "schedules" / "v2.toml").read_bytes())
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
        return bytes(data)
    return draw(st.binary(max_size=200))


FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def check(res: Result, codes: set[int]) -> None:
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in codes, (res.exit_code, res.output)
    assert "Traceback" not in res.output


# --- TOML: every command that reads a spec ------------------------------------------------


@FUZZ
@given(doc=toml_documents())
def test_fuzz_specs(tmp_path: Path, doc: bytes) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_bytes(doc)
    store = tmp_path / "s.db"
    try:
        load_spec(spec)
    except SpecError:
        pass
    else:  # a one-byte change inside a comment: a valid spec, which these commands would run
        return
    for args in (["schedule", "build", "--study", str(spec)],
                 ["schedule", "lock", "--study", str(spec)],
                 ["preflight", "--study", str(spec), "--store", str(store)],
                 ["run", "--study", str(spec), "--store", str(store)],
                 ["demo", "--study", str(spec), "--out", str(tmp_path / "demo")]):
        check(invoke(*args), {2})
    check(invoke("static", "--spec", str(spec), "--out", str(tmp_path / "static")), {2})
    assert not store.exists() and not (tmp_path / "demo").exists()


# --- JSON: verify, report --schedule, store verify --checkpoint, evals ---------------------


@FUZZ
@given(doc=json_documents(), which=st.sampled_from(["contract", "ledger", "certificate"]))
def test_fuzz_verify_inputs(tmp_path: Path, doc: bytes, which: str) -> None:
    files = {n: EXAMPLE / f"{n}.json" for n in ("contract", "ledger", "certificate")}
    files[which] = tmp_path / "hostile.json"
    files[which].write_bytes(doc)
    res = invoke("verify", *[a for n, p in files.items() for a in (f"--{n}", str(p))])
    check(res, {0, 1})
    decision = json.loads(res.stdout.splitlines()[0])
    assert decision["decision"] in ("complete", "continue")


@FUZZ
@given(doc=json_documents())
def test_fuzz_json_inputs_of_other_commands(tmp_path: Path, doc: bytes) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(doc)
    if not (tmp_path / "s.db").exists():
        key = generate_key(tmp_path / "s.db.key")
        header = {"lock_digest": digest("ect/lock/v1", {"lock": "fuzz"}),
                  "preflight_digest": digest("ect/lock/v1", {"preflight": "fuzz"}),
                  "provider": "simulated", "simulated": True}
        Store.create(tmp_path / "s.db", header=header, signing_key=key).close()
    check(invoke("store", "verify", str(tmp_path / "s.db"), "--checkpoint", str(path)), {1, 2})
    check(invoke("report", "--store", str(tmp_path / "s.db"), "--schedule", str(path),
                 "--out", str(tmp_path / "r")), {2, 3})
    check(invoke("evals", "run", str(path)), {1, 2})


# --- files that are not files -------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "fifo.json"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("which", ["contract", "ledger", "certificate"])
def test_verify_refuses_fifos_and_devices_without_hanging(which: str, fifo: Path) -> None:
    for src in (str(fifo), "/dev/zero"):
        files = {n: str(EXAMPLE / f"{n}.json") for n in ("contract", "ledger", "certificate")}
        files[which] = src
        res = ect("verify", *[a for n, p in files.items() for a in (f"--{n}", p)], timeout=30)
        assert res.code == 2, (which, src, res.out, res.err)
        assert "regular file" in res.one_line_error()


def test_evals_and_specs_refuse_fifos_without_hanging(fifo: Path, tmp_path: Path) -> None:
    res = ect("evals", "run", str(fifo), timeout=30)
    assert res.code == 2, res.err
    res.one_line_error()
    for args in (("schedule", "build", "--study", str(fifo)),
                 ("static", "--spec", str(fifo), "--out", str(tmp_path / "o")),
                 ("schedule", "build", "--study", "/dev/zero")):
        res = ect(*args, timeout=30)
        assert res.code == 2, (args, res.err)
        assert "regular file" in res.one_line_error()


def test_a_fifo_that_never_stops_writing_is_not_read(fifo: Path) -> None:
    stop = threading.Event()

    def writer() -> None:
        try:
            with open(fifo, "wb") as f:
                while not stop.is_set():
                    f.write(b"[" * 65536)
        except OSError:
            return

    threading.Thread(target=writer, daemon=True).start()
    files = {n: str(EXAMPLE / f"{n}.json") for n in ("contract", "ledger")}
    res = ect("verify", *[a for n, p in files.items() for a in (f"--{n}", p)],
              "--certificate", str(fifo), timeout=30)
    stop.set()
    assert res.code == 2, res.err


# --- bounded work and output --------------------------------------------------------------


def test_duplicate_evidence_ids_give_bounded_output(tmp_path: Path) -> None:
    cert = json.loads((EXAMPLE / "certificate.json").read_bytes())
    n = 200_000
    cert["claims"][0]["evidence"] = ["r-0001"] * n
    path = tmp_path / "dups.json"
    path.write_text(json.dumps(cert))  # noqa: TID251 - test input, not hashed
    res = ect("verify", "--contract", str(EXAMPLE / "contract.json"), "--ledger",
              str(EXAMPLE / "ledger.json"), "--certificate", str(path), timeout=120)
    assert res.code == 1, res.err
    decision = json.loads(res.out)
    dups = [r for r in decision["reasons"] if r["code"] == "evidence.duplicate_citation"]
    assert len(dups) == 17  # 16 listed, then one that counts the rest
    assert dups[-1]["detail"] == (f"... and {n - 1 - 16} more evidence.duplicate_citation "
                                  "reasons like the ones above")
    assert len(res.out) < 10_000
    assert "top_region" in decision["missing_slots"]


def test_an_oversized_input_is_malformed_not_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)
    res = ect("verify", "--contract", str(EXAMPLE / "contract.json"), "--ledger",
              str(EXAMPLE / "ledger.json"), "--certificate", str(big), timeout=60)
    assert res.code == 1, res.err
    decision = json.loads(res.out)
    assert decision["reasons"] == [{"code": "adapter.malformed_json", "slot": None,
                                    "detail": "certificate: file larger than 16777216 bytes; "
                                              "not parsed"}]


def test_an_eval_case_with_an_endless_step_budget_is_refused(tmp_path: Path) -> None:
    src = REPO / "runner" / "control" / "evals" / "goal_met_after_rejected_finish.json"
    case = json.loads(src.read_bytes())
    case["budget"] = {"max_steps": 1_000_000_000, "max_tokens": 60_000}
    path = tmp_path / "endless.json"
    path.write_text(json.dumps(case))  # noqa: TID251 - test input, not hashed
    res = ect("evals", "run", str(path), timeout=60)
    assert res.code == 2, (res.out, res.err)
    assert "max_steps: must be <= 10000" in res.one_line_error()
