"""``ect plan`` against a run: predicted vs measured provider requests and wall time.

A copy of ``schedules/v2.toml`` is locked in a temporary directory. ``plan_study`` predicts its
first ``--cells`` cells (a simulated pass) for ``--provider openai`` at ``--concurrency`` under
``--requests-per-minute``; then ``execute`` runs the same cells against the fake paid API
(``tests/fake_provider.py``, an OpenAI-compatible server on 127.0.0.1 whose replies are a
function of the request bytes, ``--latency`` seconds a reply) under the same throttle, and the
two are printed side by side, with the plan rescaled by a live pilot of ``--pilot`` cells
spread over the strata (the default) and of the first ``--pilot`` cells. The target (issue 36):
requests and wall time within 10%.

    python benchmarks/plan.py [--cells 24] [--requests-per-minute 120] [--concurrency 4]
                              [--pilot 8] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = 0.10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=24)
    parser.add_argument("--requests-per-minute", type=int, default=120)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--pilot", type=int, default=8,
                        help="Also plan with a live pilot of N cells, spread and first (0: not).")
    parser.add_argument("--smoke", action="store_true",
                        help="4 cells, a 2-cell pilot, 0.01 s a reply, 600 requests a minute: "
                        "checks that the benchmark runs, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.cells, args.pilot, args.latency, args.requests_per_minute = 4, 2, 0.01, 600

    from runner.study import (
        PlanSettings,
        ProviderChoice,
        RunSettings,
        execute,
        load_spec,
        plan_study,
        run_preflight,
        study_paths,
        write_lock,
        write_schedule,
    )
    from tests.fake_provider import FakeProvider, Faults

    with tempfile.TemporaryDirectory(prefix="ect-bench-plan-") as tmp:
        spec_path = Path(tmp) / "v2.toml"
        shutil.copyfile(REPO / "schedules" / "v2.toml", spec_path)
        spec = load_spec(spec_path)
        paths = study_paths(spec_path)
        write_schedule(spec, paths)
        write_lock(spec, paths)
        t0 = time.perf_counter()
        plan = plan_study(PlanSettings(spec_path, provider="openai", model=spec.model.name,
                                       concurrency=args.concurrency, limit=args.cells,
                                       requests_per_minute=args.requests_per_minute,
                                       tokens_per_minute=0, latency_s=args.latency))
        plan_s = time.perf_counter() - t0
        sim_store = Path(tmp) / "sim.db"
        sim_report = run_preflight(spec_path, sim_store, ProviderChoice(), probes="mandatory")
        sim = execute(RunSettings(spec_path, sim_store, ProviderChoice(), args.concurrency,
                                  args.cells, requests_per_minute=args.requests_per_minute,
                                  tokens_per_minute=0), preflight=sim_report)
        with FakeProvider(Faults(latency_s=args.latency)) as server:
            piloted = {}
            for sampling in ("spread", "first") if args.pilot else ():
                piloted[sampling] = plan_study(PlanSettings(
                    spec_path, provider="openai", model=spec.model.name,
                    concurrency=args.concurrency, limit=args.cells,
                    requests_per_minute=args.requests_per_minute, tokens_per_minute=0,
                    latency_s=args.latency, pilot=args.pilot,
                    pilot_store=Path(tmp) / f"pilot-{sampling}.db", pilot_cells=sampling,
                    pilot_probes="mandatory",
                    pilot_choice=ProviderChoice("openai", model=spec.model.name,
                                                base_url=server.url)))
            store = Path(tmp) / "run.db"
            choice = ProviderChoice("openai", model=spec.model.name, base_url=server.url)
            report = run_preflight(spec_path, store, choice, probes="mandatory")
            assert report.passed, [c.to_json() for c in report.checks if not c.ok]
            summary = execute(RunSettings(spec_path, store, choice, args.concurrency, args.cells,
                                          requests_per_minute=args.requests_per_minute,
                                          tokens_per_minute=0), preflight=report)
        real_calls, sim_calls = _calls(store), _calls(sim_store)
    rpm = args.requests_per_minute
    print(f"{args.cells} cells, concurrency {args.concurrency}, {rpm} requests/min, fake API "
          f"{args.latency} s a reply (plan took {plan_s:.1f} s; its figures are SIMULATED)")
    print(f"  plan:           {plan.requests.expected:5.0f} requests (min {plan.requests.min:.0f}, "
          f"max {plan.requests.max:.0f}), wall {plan.wall_s.expected:6.1f} s ({plan.wall_bound})")
    for sampling, p in piloted.items():
        se = f" ± {p.requests_se:.0f}" if p.requests_se is not None else ""
        print(f"  plan + pilot {args.pilot} {sampling:<6}: {p.requests.expected:5.0f}{se} requests, "
              f"wall {p.wall_s.expected:6.1f} s ({p.wall_bound})")
    rows = []
    for label, n, wall in (("simulated run", sim.provider_attempts, sim.wall_s),
                           ("fake API run", summary.provider_attempts, summary.wall_s)):
        dr, dw = plan.requests.expected / n - 1, plan.wall_s.expected / wall - 1
        # the plan's throttle model given the request count: spaced 1.001 x 60/N, a last reply
        floor = (n - 1) * 1.001 * 60.0 / rpm + args.latency
        rows.append((label, dr, dw))
        print(f"  {label:<15} {n:5d} requests ({dr:+.1%}), wall {wall:6.1f} s ({dw:+.1%}; "
              f"given {n} requests the throttle model says {floor:.1f} s: "
              f"{floor / wall - 1:+.1%})")
    for sampling, p in piloted.items():
        n, wall = summary.provider_attempts, summary.wall_s
        rows.append((f"fake API run (plan with a {args.pilot}-cell pilot, {sampling})",
                     p.requests.expected / n - 1, p.wall_s.expected / wall - 1))
    # why the fake API run differs: its replies (every attempt answered first time: no retry)
    print(f"  fake API run: {summary.provider_attempts} attempts for "
          f"{sum(real_calls.values())} calls; calls fake/simulated by checkpoint x pipeline: "
          + ", ".join(f"{c}/{p} {real_calls[c, p]}/{sim_calls[c, p]}"
                      for c, p in sorted(sim_calls)))
    for label, dr, dw in rows:
        ok = abs(dr) <= TARGET and abs(dw) <= TARGET
        print(f"plan vs {label}: requests {dr:+.1%}, wall {dw:+.1%} (target within "
              f"{TARGET:.0%}: {'met' if ok else 'NOT met'})")
    n, wall = summary.provider_attempts, summary.wall_s
    print(f"plan: {plan.requests.expected:.0f} requests, {plan.wall_s.expected:.1f} s predicted "
          f"(baseline: the fake API run, {n} requests in {wall:.1f} s: "
          f"{plan.requests.expected / n - 1:+.1%}, {plan.wall_s.expected / wall - 1:+.1%}; "
          f"target within {TARGET:.0%})")


def _calls(store_path: Path) -> dict[tuple[str, str], int]:
    """Provider calls (retries not counted) by (checkpoint, pipeline) in a store."""
    from runner.store import Store
    from runner.study import CellRecord

    out: dict[tuple[str, str], int] = {}
    with Store.open(store_path, readonly=True) as store:
        for rec in store.records(1):
            cell = CellRecord.from_json(rec.body, f"record {rec.seq}")
            key = (cell.schedule_row.checkpoint, cell.schedule_row.policy)
            out[key] = out.get(key, 0) + len(cell.audit.calls)
    return out


if __name__ == "__main__":
    main()
