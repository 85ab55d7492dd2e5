"""``ect tasks``: the benchmark's tasks, manifest, and an export ``ect verify`` can read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runner.cli._common import map_errors

if TYPE_CHECKING:
    from runner.canonical import JsonObject

__all__ = ["COMMANDS", "tasks_group"]


def _show(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)  # noqa: TID251  (display only)


@click.group("tasks")
def tasks_group() -> None:
    """The benchmark: 48 static tasks x 9 conditions, 24 closed-loop tasks x 2 checkpoints."""


@tasks_group.command("manifest")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (counts and digest).")
@map_errors()
def manifest_command(as_json: bool) -> None:
    """Count what was built and print the task-manifest digest the study lock pins."""
    from runner.worlds import manifest_counts, task_manifest_digest

    summary = {**manifest_counts(), "digest": task_manifest_digest()}
    if as_json:
        click.echo(_show(summary))
        return
    st, cl = summary["static"], summary["closed_loop"]
    click.echo(
        f"static:      {st['tasks']} tasks, {st['snapshots']} snapshots "
        f"({st['heldout_fault_snapshots']} held-out fault snapshots)"
    )
    click.echo(f"closed loop: {cl['tasks']} tasks, {cl['checkpoints']} checkpoints")
    click.echo(f"digest:      {summary['digest']}")


@tasks_group.command("list")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON array of {task_id, split, family, world_id}.")
@map_errors()
def list_command(as_json: bool) -> None:
    """List every task id with its split, family and world."""
    from runner.worlds import closed_loop_tasks, static_tasks

    tasks = (*static_tasks(), *closed_loop_tasks())
    if as_json:
        from runner.canonical import canonical_bytes

        click.echo(canonical_bytes([{"task_id": t.task_id, "split": t.split, "family": t.family,
                                     "world_id": t.world_id} for t in tasks]).decode())
        return
    for t in tasks:
        click.echo(f"{t.task_id:32} {t.split:12} {t.family:20} {t.world_id}")


def _slot_lines(task_id: str) -> list[str]:
    from runner.worlds import get_task

    task = get_task(task_id)
    lines = []
    for name, spec in task.contract.slots.items():
        t = spec.transforms[0]
        card = spec.cardinality
        lines.append(
            f"  {name}: {t.op} {_show(t.params)}; scope {_show(spec.scope.to_json())}; "
            f"cardinality {card.min if card else '-'}..{card.max if card else '-'}; "
            f"nullable {str(spec.nullable).lower()}; tolerance {spec.tolerance_abs}"
        )
    return lines


@tasks_group.command("show")
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: task, contract, gold, plan and checkpoints/snapshots.")
@map_errors()
def show_command(task_id: str, as_json: bool) -> None:
    """Print a task: descriptor, contract slots, gold answer, plan and checkpoints/snapshots."""
    from runner.worlds import closed_loop_checkpoints, get_task, plan_calls, static_grid

    task = get_task(task_id)
    if as_json:
        from runner.canonical import canonical_bytes

        doc: JsonObject = {
            "task_id": task.task_id, "family": task.family, "world_id": task.world_id,
            "split": task.split, "parameters": task.parameters,
            "contract": task.contract.to_json(), "gold": task.gold,
            "plan": [{"tool_id": t, "args": a} for t, a in plan_calls(task.contract)],
        }
        if task.split == "closed_loop":
            doc["checkpoints"] = [
                {"checkpoint_id": c.checkpoint_id, "fault": c.fault, "calls": len(c.trace),
                 "receipts": len(c.ledger.receipts), "needs_human": c.needs_human,
                 "recovery": [{"tool_id": t, "args": a} for t, a in c.recovery_calls]}
                for c in closed_loop_checkpoints() if c.task.task_id == task_id]
        else:
            doc["snapshots"] = [
                {"snapshot_id": s.snapshot_id, "gold_decision": s.gold_decision,
                 "calls": len(s.trace), "receipts": len(s.ledger.receipts),
                 "claims": len(s.certificate.claims)}
                for s in static_grid() if s.task.task_id == task_id]
        click.echo(canonical_bytes(doc).decode())
        return
    click.echo(f"task      {task.task_id}")
    click.echo(f"family    {task.family}")
    click.echo(f"world     {task.world_id} ({task.split})")
    click.echo(f"params    {_show(task.parameters)}")
    click.echo("contract  (ect.contract/1; every slot required)")
    for line in _slot_lines(task_id):
        click.echo(line)
    click.echo("gold      (SQL and Python oracles agree)")
    for slot, value in task.gold.items():
        click.echo(f"  {slot} = {_show(value)}")
    click.echo("plan      (calls that cover the contract)")
    for tool_id, args in plan_calls(task.contract):
        click.echo(f"  {tool_id}({_show(args)})")
    if task.split == "closed_loop":
        click.echo("checkpoints")
        for c in closed_loop_checkpoints():
            if c.task.task_id != task_id:
                continue
            extra = f" fault {c.fault}" if c.fault else ""
            click.echo(
                f"  {c.checkpoint_id}:{extra} {len(c.trace)} calls, {len(c.ledger.receipts)} "
                f"receipts, recovery {len(c.recovery_calls)} call(s)"
                + (", needs_human" if c.needs_human else "")
            )
            for tool_id, args in c.recovery_calls:
                click.echo(f"    recover: {tool_id}({_show(args)})")
    else:
        click.echo("snapshots")
        for s in static_grid():
            if s.task.task_id == task_id:
                click.echo(
                    f"  {s.snapshot_id}: gold {s.gold_decision}, {len(s.trace)} calls, "
                    f"{len(s.ledger.receipts)} receipts, {len(s.certificate.claims)} claims"
                )


@tasks_group.command("export")
@click.argument("directory", type=click.Path(path_type=Path))
@map_errors()
def export_command(directory: Path) -> None:
    """Write every snapshot's contract, ledger and certificate JSON under DIRECTORY.

    Layout: DIRECTORY/static/<task>/<condition>/{contract,ledger,certificate,snapshot}.json and
    DIRECTORY/closed_loop/<task>/<clean|incomplete>/{contract,ledger,certificate,checkpoint}.json,
    plus worlds/<world>.json and manifest.json. Then, e.g.:
    ect verify --contract D/contract.json --ledger D/ledger.json --certificate D/certificate.json
    """
    from runner.worlds import export_all

    counts = export_all(directory)
    click.echo(
        f"wrote {counts['snapshots']} snapshots, {counts['checkpoints']} checkpoints and "
        f"{counts['worlds']} worlds under {directory}"
    )


COMMANDS: list[click.Command] = [tasks_group]
