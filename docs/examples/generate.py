"""Regenerate the worked examples of docs/formats.md (also the test fixtures of tests/ect).

Run ``python docs/examples/generate.py`` from the repository root; ``--check`` exits 1 when a
committed file differs from what this script writes (tests/ect/test_examples.py runs it).
The expected decision of every case is written by hand below, not computed by the verifier.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from runner.ect import (
    Contract,
    Ledger,
    args_digest,
    descriptor_digest,
    ledger_digest,
    response_digest,
    value_digest,
)

HERE = Path(__file__).resolve().parent
DAYS = [f"2026-03-0{d}" for d in range(1, 8)]


def receipt(
    n: int,
    task: str,
    tool: str,
    args: dict[str, Any],
    value: Any,
    scope: tuple[str | None, str | None, str | None, str | None],
    *,
    path: str = "/result/value",
) -> dict[str, Any]:
    response = {"ok": True, "result": {"value": value}}
    entity, attribute, level, date = scope
    return {
        "receipt_id": f"r-{n:04d}",
        "task_id": task,
        "call_id": f"c-{n:04d}",
        "tool_id": tool,
        "args_sha256": args_digest(args),
        "response_sha256": response_digest(response),
        "source_path": path,
        "value": value,
        "value_sha256": value_digest(value),
        "exec_status": "ok",
        "validation": "valid",
        "scope": {"entity": entity, "attribute": attribute, "level": level, "date": date},
    }


def metric(n: int, task: str, entity: str, attribute: str, date: str, value: Any) -> dict[str, Any]:
    args = {"entity": entity, "attribute": attribute, "date": date}
    return receipt(n, task, "get_metric", args, value, (entity, attribute, "store", date))


def membership(n: int, task: str, child: str, parent: str) -> dict[str, Any]:
    return receipt(
        n, task, "get_parent", {"entity": child}, parent, (child, "parent", "store", None),
        path="/result/parent",
    )


def contract(task: str, family: str, params: dict[str, Any], slots: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "ect.contract/1",
        "task_id": task,
        "descriptor": {
            "task_id": task,
            "family": family,
            "world_id": task.split("-", 1)[0],
            "parameters": params,
            "required_slots": list(slots),
        },
        "slots": slots,
    }


def slot(transforms: list[dict[str, Any]], scope: dict[str, Any], card: tuple[int, int] | None,
         *, nullable: bool = False, tol: int | float = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"transforms": transforms, "scope": scope, "nullable": nullable,
                           "tolerance": {"abs": tol}}
    if card is not None:
        out["cardinality"] = {"min": card[0], "max": card[1]}
    return out


def op(name: str, **params: Any) -> dict[str, Any]:
    return {"op": name, "params": params}


def ledger(task: str, receipts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": "ect.ledger/1", "task_id": task, "receipts": receipts}


def certificate(c: dict[str, Any], led: dict[str, Any], claims: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "ect.certificate/1",
        "task_id": c["task_id"],
        "descriptor_digest": descriptor_digest(Contract.from_json(c).descriptor),
        "ledger_digest": ledger_digest(Ledger.from_json(led)),
        "claims": claims,
    }


def claim(name: str, value: Any, evidence: list[int], transform: dict[str, Any]) -> dict[str, Any]:
    return {"slot": name, "value": value, "evidence": [f"r-{n:04d}" for n in evidence],
            "transform": transform}


# --- the cases ---------------------------------------------------------------------------------


def build() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    files: dict[str, Any] = {}
    cases: list[dict[str, Any]] = []

    def case(name: str, c: str, lg: str, cert: str, decision: str, codes: list[str],
             missing: list[str], note: str) -> None:
        cases.append({"name": name, "contract": c, "ledger": lg, "certificate": cert,
                      "decision": decision, "codes": codes, "missing_slots": missing,
                      "exit": 0 if decision == "complete" else 1, "note": note})

    # 1. Aggregation: 7 daily revenue receipts of S03 plus 3 of S04 (10 receipts, 2 slots).
    t = "w10-aggregation-0"
    values = [41250, 39800, 45010, 38000, 50125, 47300, 27265]
    scope = {"entity": ["S03"], "attribute": ["revenue"], "level": ["store"],
             "dates": {"start": DAYS[0], "end": DAYS[6]}}
    agg_c = contract(t, "aggregation",
                     {"entity": "S03", "attribute": "revenue", "start": DAYS[0], "end": DAYS[6]},
                     {"total": slot([op("sum")], scope, (7, 7)),
                      "days": slot([op("count")], scope, (7, 7))})
    recs = [metric(i + 1, t, "S03", "revenue", DAYS[i], v) for i, v in enumerate(values)]
    recs += [metric(8 + j, t, "S04", "revenue", DAYS[j], v) for j, v in enumerate([9100, 8700, 9900])]
    agg_l = ledger(t, recs)
    ev = list(range(1, 8))
    good = certificate(agg_c, agg_l, [claim("total", 288750, ev, op("sum")),
                                      claim("days", 7, ev, op("count"))])
    files["aggregation/contract.json"] = agg_c
    files["aggregation/ledger.json"] = agg_l
    files["aggregation/certificate.json"] = good
    A = ("aggregation/contract.json", "aggregation/ledger.json")
    case("aggregation-complete", *A, "aggregation/certificate.json", "complete", [], [],
         "every slot bound to 7 in-scope receipts; sum and count replay exactly")

    bad = copy.deepcopy(good)
    bad["claims"] = bad["claims"][:1]
    files["aggregation/certificate-missing-slot.json"] = bad
    case("aggregation-missing-slot (F5)", *A, "aggregation/certificate-missing-slot.json",
         "continue", ["coverage.missing_slot"], ["days"], "the days slot is omitted")

    bad = copy.deepcopy(good)
    bad["claims"][0]["value"] = 290000
    files["aggregation/certificate-altered-value.json"] = bad
    case("aggregation-altered-value (F6)", *A, "aggregation/certificate-altered-value.json",
         "continue", ["replay.mismatch"], ["total"], "the total was changed after retrieval")

    bad = copy.deepcopy(good)
    bad["claims"][0]["evidence"][6] = "r-0008"
    bad["claims"][0]["value"] = 288750 - 27265 + 9100
    files["aggregation/certificate-wrong-entity.json"] = bad
    case("aggregation-wrong-entity (F2)", *A, "aggregation/certificate-wrong-entity.json",
         "continue", ["scope.entity_mismatch"], ["total"],
         "a receipt of S03 replaced by one of S04; the value even replays, the scope does not")

    bad = copy.deepcopy(good)
    bad["claims"][1]["evidence"] = ["r-0001", "r-0002", "r-0003", "r-0004", "r-0005", "r-0006",
                                    "r-0006"]
    files["aggregation/certificate-double-count.json"] = bad
    case("aggregation-double-count (U2)", *A, "aggregation/certificate-double-count.json",
         "continue", ["evidence.duplicate_citation", "scope.cardinality", "replay.mismatch"],
         ["days"], "one receipt cited twice to reach the cardinality")

    bad = copy.deepcopy(good)
    bad["confidence"] = 0.99
    files["aggregation/certificate-extra-field.json"] = bad
    case("aggregation-extra-field", *A, "aggregation/certificate-extra-field.json", "continue",
         ["adapter.malformed_certificate"], ["total", "days"], "extra fields are forbidden")

    files["aggregation/certificate-truncated.json"] = None  # written as truncated text below
    case("aggregation-truncated", *A, "aggregation/certificate-truncated.json", "continue",
         ["adapter.malformed_json"], ["total", "days"], "a truncated file is not JSON")

    # 2. Top-k with a tie: S02 and S03 both sold 900 units; ties go to the smallest id.
    t = "w10-top-k-0"
    d = "2026-03-02"
    units = {"S01": 500, "S02": 900, "S03": 900, "S04": 100}
    sc = {"entity": sorted(units), "attribute": ["units"], "level": ["store"], "dates": [d]}
    top_c = contract(t, "top-k", {"attribute": "units", "date": d, "k": 2, "order": "desc"},
                     {"top_stores": slot([op("top_k", k=2, order="desc")], sc, (4, 4)),
                      "best_store": slot([op("argmax")], sc, (4, 4))})
    top_l = ledger(t, [metric(i + 1, t, e, "units", d, v) for i, (e, v) in enumerate(units.items())])
    top_x = certificate(top_c, top_l, [claim("top_stores", ["S02", "S03"], [1, 2, 3, 4],
                                             op("top_k", k=2, order="desc")),
                                       claim("best_store", "S02", [1, 2, 3, 4], op("argmax"))])
    files["top-k/contract.json"] = top_c
    files["top-k/ledger.json"] = top_l
    files["top-k/certificate.json"] = top_x
    case("top-k-tie-complete", "top-k/contract.json", "top-k/ledger.json",
         "top-k/certificate.json", "complete", [], [], "tie S02/S03 broken by smallest id")
    bad = copy.deepcopy(top_x)
    bad["claims"][0]["transform"] = op("top_k", k=3, order="desc")
    bad["claims"][0]["value"] = ["S02", "S03", "S01"]
    files["top-k/certificate-wrong-k.json"] = bad
    case("top-k-wrong-k (U3)", "top-k/contract.json", "top-k/ledger.json",
         "top-k/certificate-wrong-k.json", "continue", ["transform.not_permitted"], ["top_stores"],
         "k=3 is a well-formed op but not the one the contract permits")

    # 3. Hierarchy join: stores grouped by region via membership receipts.
    t = "w10-hierarchy-0"
    d = "2026-03-03"
    parents = {"S01": "R1", "S02": "R1", "S03": "R2", "S04": "R2", "S05": "R3"}
    sales = {"S01": 120, "S02": 80, "S03": 150, "S04": 60, "S05": 190}
    sc = {"entity": sorted(parents), "attribute": ["units", "parent"], "level": ["store"],
          "dates": [d]}
    sc_m = {"entity": sorted(parents), "attribute": ["parent"], "level": ["store"]}
    hier_c = contract(t, "hierarchy-join", {"attribute": "units", "date": d, "k": 1},
                      {"top_region": slot([op("grouped_sum_top_k", k=1, order="desc")], sc, (10, 10)),
                       "regions": slot([op("union")], sc_m, (5, 5))})
    recs = [membership(i + 1, t, s, p) for i, (s, p) in enumerate(parents.items())]
    recs += [metric(6 + i, t, s, "units", d, v) for i, (s, v) in enumerate(sales.items())]
    hier_l = ledger(t, recs)
    hier_x = certificate(hier_c, hier_l, [
        claim("top_region", ["R2"], list(range(1, 11)), op("grouped_sum_top_k", k=1, order="desc")),
        claim("regions", ["R1", "R2", "R3"], [1, 2, 3, 4, 5], op("union")),
    ])
    files["hierarchy/contract.json"] = hier_c
    files["hierarchy/ledger.json"] = hier_l
    files["hierarchy/certificate.json"] = hier_x
    case("hierarchy-complete", "hierarchy/contract.json", "hierarchy/ledger.json",
         "hierarchy/certificate.json", "complete", [], [],
         "R1=200, R2=210, R3=190: R2 is the top region")

    # 4. Temporal comparison: diff, exact ratio within a tolerance, window_sum_diff.
    t = "w10-temporal-0"
    vals = [41250, 39800, 45010, 38000, 50125, 47300, 27265]
    sc = {"entity": ["S03"], "attribute": ["revenue"], "level": ["store"],
          "dates": {"start": DAYS[0], "end": DAYS[6]}}
    wa = {"start": DAYS[4], "end": DAYS[6]}
    wb = {"start": DAYS[0], "end": DAYS[2]}
    tmp_c = contract(t, "temporal-comparison",
                     {"entity": "S03", "attribute": "revenue", "a": DAYS[6], "b": DAYS[0]},
                     {"change": slot([op("diff", a=DAYS[6], b=DAYS[0])], sc, (2, 2)),
                      "ratio": slot([op("ratio", a=DAYS[6], b=DAYS[0])], sc, (2, 2), tol=0.001),
                      "window_change": slot([op("window_sum_diff", a=wa, b=wb)], sc, (6, 6))})
    tmp_l = ledger(t, [metric(i + 1, t, "S03", "revenue", DAYS[i], v) for i, v in enumerate(vals)])
    tmp_x = certificate(tmp_c, tmp_l, [
        claim("change", 27265 - 41250, [7, 1], op("diff", a=DAYS[6], b=DAYS[0])),
        claim("ratio", 0.661, [1, 7], op("ratio", a=DAYS[6], b=DAYS[0])),
        claim("window_change", (50125 + 47300 + 27265) - (41250 + 39800 + 45010),
              [1, 2, 3, 5, 6, 7], op("window_sum_diff", a=wa, b=wb)),
    ])
    files["temporal/contract.json"] = tmp_c
    files["temporal/ledger.json"] = tmp_l
    files["temporal/certificate.json"] = tmp_x
    case("temporal-complete", "temporal/contract.json", "temporal/ledger.json",
         "temporal/certificate.json", "complete", [], [],
         "27265/41250 = 0.66097 exactly-rational; 0.661 is within the 0.001 tolerance")

    # 5. Missing-data abstention: the metric is null on the asked day; the slot is nullable.
    t = "w10-missing-data-0"
    sc_null = {"entity": ["S05"], "attribute": ["returns"], "level": ["store"], "dates": [DAYS[3]]}
    sc_prev = {"entity": ["S05"], "attribute": ["returns"], "level": ["store"], "dates": [DAYS[2]]}
    abs_c = contract(t, "missing-data", {"entity": "S05", "attribute": "returns", "date": DAYS[3]},
                     {"value": slot([op("all_null")], sc_null, (1, 1), nullable=True),
                      "previous": slot([op("identity")], sc_prev, (1, 1))})
    abs_l = ledger(t, [metric(1, t, "S05", "returns", DAYS[2], 3),
                       metric(2, t, "S05", "returns", DAYS[3], None)])
    abs_x = certificate(abs_c, abs_l, [claim("value", None, [2], op("all_null")),
                                       claim("previous", 3, [1], op("identity"))])
    files["missing-data/contract.json"] = abs_c
    files["missing-data/ledger.json"] = abs_l
    files["missing-data/certificate.json"] = abs_x
    case("missing-data-abstention-complete", "missing-data/contract.json",
         "missing-data/ledger.json", "missing-data/certificate.json", "complete", [], [],
         "an abstention (null) backed by a null receipt in a nullable slot")

    # 6. Trust boundary (T1): two valid receipts disagree about one scope key.
    t = "w10-lookup-0"
    d = "2026-03-02"
    sc_v = {"entity": ["S03"], "attribute": ["revenue"], "level": ["store"], "dates": [d]}
    sc_p = {"entity": ["S03"], "attribute": ["parent"], "level": ["store"]}
    look_c = contract(t, "lookup", {"entity": "S03", "attribute": "revenue", "date": d},
                      {"value": slot([op("identity")], sc_v, (1, 1)),
                       "region": slot([op("identity")], sc_p, (1, 1))})
    look_l = ledger(t, [metric(1, t, "S03", "revenue", d, 39800),
                        membership(2, t, "S03", "R2"),
                        metric(3, t, "S03", "revenue", d, 39080)])
    look_x = certificate(look_c, look_l, [claim("value", 39800, [1], op("identity")),
                                          claim("region", "R2", [2], op("identity"))])
    files["trust-boundary/contract.json"] = look_c
    files["trust-boundary/ledger.json"] = look_l
    files["trust-boundary/certificate.json"] = look_x
    case("trust-boundary-conflict (T1)", "trust-boundary/contract.json",
         "trust-boundary/ledger.json", "trust-boundary/certificate.json", "continue",
         ["evidence.conflicting_receipts"], ["value"],
         "the ledger holds 39800 and 39080 for one key: a human must decide")

    return files, cases


def render(files: dict[str, Any], cases: list[dict[str, Any]]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name, obj in files.items():
        if obj is None:
            continue
        # Display formatting only; the digests inside were computed with runner.canonical.
        out[name] = (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()  # noqa: TID251
    good = out["aggregation/certificate.json"]
    out["aggregation/certificate-truncated.json"] = good[: len(good) // 2]
    out["index.json"] = (json.dumps({"cases": cases}, indent=2) + "\n").encode()  # noqa: TID251
    return out


def main(argv: list[str]) -> int:
    rendered = render(*build())
    if "--check" in argv:
        stale = [n for n, b in rendered.items() if not (HERE / n).is_file() or (HERE / n).read_bytes() != b]
        for n in stale:
            print(f"stale: docs/examples/{n}", file=sys.stderr)
        return 1 if stale else 0
    for name, data in rendered.items():
        path = HERE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"wrote {len(rendered)} files under {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
