"""The credential never reaches a child process, the store or the logs.

A real run with ``--provider openai`` against a local fake OpenAI-compatible server, the key
given as ``--credential-env`` holding a canary value. The server sees the key (the positive
control); then every byte the run left behind is searched for it: the store file and its WAL,
blobs, checkpoint and key files, stdout and the JSON logs on stderr, and the argv and
environment of every child process the CLI started (the sandbox's bwrap children among them).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from runner.sandbox._bwrap import SANDBOX_ENV
from runner.store import Store
from tests.study.conftest import Reference
from tests.study.fake_openai import FakeOpenAI
from tests.study.support import ect, subprocess_env


def test_canary_credential_reaches_no_child_store_or_log(tmp_path: Path,
                                                         reference: Reference) -> None:
    canary = "sk-ect-canary-" + secrets.token_hex(16)
    store = tmp_path / "runs" / "live.db"
    store.parent.mkdir()
    spawns = tmp_path / "spawns.jsonl"
    env = subprocess_env(ECT_CANARY_KEY=canary, ECT_TEST_SPAWN_LOG=str(spawns))
    with FakeOpenAI() as server:
        done = ect("run", "--study", str(reference.spec), "--store", str(store),
                   "--provider", "openai", "--base-url", server.url,
                   "--credential-env", "ECT_CANARY_KEY", "--limit", "4", "--log-json", "--json",
                   env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["committed"] == 4 and summary["provider"] == "openai"
    assert summary["tool_calls"] >= 4, "every cell's first decision is a sandboxed tool call"

    # Positive control: the key did go to the provider, and only there.
    assert server.seen and all(s.headers.get("authorization") == f"Bearer {canary}"
                               for s in server.seen)
    assert all(canary.encode() not in s.body for s in server.seen)

    # Children: every one got an explicit environment without the key, and no argv holds it.
    children = [json.loads(line) for line in spawns.read_text("utf-8").splitlines()]
    # a sandbox launcher's argv[0] is the reaper's tag; the program is bwrap
    bwrap = [c for c in children if Path(c["executable"] or c["argv"][0]).name == "bwrap"]
    assert len(bwrap) >= summary["tool_calls"]
    for child in children:
        assert child["env"] is not None, f"{child['argv'][0]} inherits the parent environment"
        assert canary not in json.dumps(child), child["argv"][0]  # noqa: TID251 - search only
        assert "ECT_CANARY_KEY" not in child["env"]
    for child in bwrap:
        assert child["env"] == {}
        assert "--clearenv" in child["argv"]
        pairs = [(child["argv"][i + 1], child["argv"][i + 2])
                 for i, a in enumerate(child["argv"]) if a == "--setenv"]
        assert dict(pairs) == dict(SANDBOX_ENV)

    # The store and everything beside it; blobs hold the raw requests and responses.
    with Store.open(store) as s:
        header = s.header
        blobs = [s.get_blob(d) for b in s.records(1) for call in b.body["audit"]["calls"]
                 for x in call["raw"] for d in (x["request"], x["response"]) if d]
    assert header["provider"] == "openai" and blobs
    assert all(canary.encode() not in blob for blob in blobs)
    files = [p for p in store.parent.iterdir() if p.is_file()]
    assert store in files and len(files) >= 3
    for path in files:
        assert canary.encode() not in path.read_bytes(), path.name

    # Logs (one JSON object per line with --log-json) and output.
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    committed = [e for e in events if e.get("event") == "cell.committed"]
    assert len(committed) == 4 and all(e["level"] == "info" and e["timestamp"].endswith("Z")
                                       for e in committed)
    assert [e["row"] for e in committed] == [1, 2, 3, 4]
    assert canary not in done.stderr and canary not in done.stdout

    # The live run replays offline from the store alone: no server, no credential.
    replayed = ect("replay", "--store", str(store), "--study", str(reference.spec), "--json",
                   env=subprocess_env())
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    report = json.loads(replayed.stdout)
    assert report["cells"] == 4 and report["reproduced"] == 4 and not report["mismatches"]
