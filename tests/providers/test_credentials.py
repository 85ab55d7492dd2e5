"""Credentials: explicit sources only, mode checked, redacted; a canary key appears nowhere."""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys

import anyio
import pytest

from runner.canonical import canonical_bytes
from runner.providers import (
    CredentialError,
    GeminiProvider,
    OpenAICompatProvider,
    load_credential,
)
from tests.providers.conftest import gemini_ok, make_request, openai_ok
from tests.providers.fakeserver import Close, Reply, StallAfterHead


def test_exactly_one_source(credential_file):
    with pytest.raises(CredentialError):
        load_credential()
    with pytest.raises(CredentialError):
        load_credential(file=credential_file, env="X")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o620])
def test_group_or_world_accessible_file_refused(credential_file, canary, mode):
    os.chmod(credential_file, mode)
    with pytest.raises(CredentialError, match="chmod 600") as info:
        load_credential(file=credential_file)
    assert canary not in str(info.value)


def test_file_problems_are_one_line_errors(tmp_path, canary):
    with pytest.raises(CredentialError, match="does not exist"):
        load_credential(file=tmp_path / "missing")
    with pytest.raises(CredentialError):
        load_credential(file=tmp_path)  # a directory
    link = tmp_path / "link"
    target = tmp_path / "target"
    target.write_text(canary)
    target.chmod(0o600)
    link.symlink_to(target)
    with pytest.raises(CredentialError):  # symlinks are not followed
        load_credential(file=link)
    bad = tmp_path / "bad"
    bad.write_text("two words\n")
    bad.chmod(0o600)
    with pytest.raises(CredentialError, match="printable ASCII"):
        load_credential(file=bad)


def test_env_credential_is_removed_from_environment(monkeypatch, canary):
    monkeypatch.setenv("ECT_TEST_PROVIDER_KEY", canary)
    cred = load_credential(env="ECT_TEST_PROVIDER_KEY")
    assert cred.reveal() == canary
    assert "ECT_TEST_PROVIDER_KEY" not in os.environ
    with pytest.raises(CredentialError, match="not set"):
        load_credential(env="ECT_TEST_PROVIDER_KEY")
    with pytest.raises(CredentialError):
        load_credential(env="not a name; rm -rf")


def test_repr_str_and_pickle_are_safe(credential, canary):
    assert canary not in repr(credential) and canary not in str(credential)
    assert canary not in f"{credential}" and "[REDACTED]" in repr(credential)
    with pytest.raises(TypeError):
        pickle.dumps(credential)
    assert credential.redact(f"key={canary}!") == "key=[REDACTED]!"


def test_canary_appears_nowhere(server, credential_file, canary, caplog, monkeypatch, tmp_path):
    """Plant a canary key; run real calls (success, 429, 500, retry, timeout, malformed) through
    both HTTP adapters with DEBUG logging everywhere; search every output for it."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("ECT_CANARY_ENV", canary)
    env_cred = load_credential(env="ECT_CANARY_ENV")
    file_cred = load_credential(file=credential_file)
    quota = Reply.json(
        {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}, 429)
    internal = Reply.json({"error": {"code": 500, "message": "x", "status": "INTERNAL"}}, 500)
    server.play(  # a transport failure is retried once: each failing call gets two
        Reply.json(gemini_ok()),
        quota, quota,
        internal, internal,
        Close(),
        Reply.json(gemini_ok()),
        Reply(200, b"{nope"), Reply(200, b"{nope"),
        StallAfterHead(30.0), StallAfterHead(30.0),
        Reply.json(openai_ok()),
        Reply.json({"error": {}}, 429), Reply.json({"error": {}}, 429),
    )
    gemini = GeminiProvider(file_cred, base_url=server.url, timeout_s=10.0)
    openai = OpenAICompatProvider(server.url + "/v1", credential=env_cred, model="m", timeout_s=1.0)
    outputs: list[str] = [repr(gemini), repr(openai), repr(file_cred), repr(env_cred)]
    results = []

    async def main() -> None:
        for _ in range(5):
            results.append(await gemini.generate(make_request()))
        for _ in range(3):
            results.append(await openai.generate(make_request()))
        await gemini.aclose()
        await openai.aclose()

    anyio.run(main)
    assert [r.ok for r in results] == [True, False, False, True, False, False, True, False]
    blobs: list[bytes] = []
    for r in results:
        outputs.append(repr(r))
        blobs.append(canonical_bytes(r.to_json()))
        for raw in r.raw:
            blobs.append(raw.request_bytes)
            blobs.append(raw.response_bytes or b"")
        if r.failure is not None:
            outputs.append(str(r.failure.as_error()))
    outputs.append(caplog.text)
    outputs.extend(rec.getMessage() for rec in caplog.records)
    # positive control: the key really was used on the wire
    assert all(
        canary in (s.headers.get("x-goog-api-key", "") + s.headers.get("authorization", ""))
        for s in server.seen
    )
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(repr(dict(os.environ)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    outputs.append(child.stdout)
    assert canary not in os.environ.values()
    for text in outputs:
        assert canary not in text
    for blob in blobs:
        assert canary.encode() not in blob


_HOLDER = """
import sys
from runner.providers import load_credential
credential = load_credential(env="ECT_CANARY_KEY")
print("loaded", flush=True)
sys.stdin.readline()
print("still held" if credential.reveal() == sys.argv[1] else "lost", flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/environ is Linux's")
def test_env_credential_is_gone_from_the_process_environment_block(canary):
    # os.environ.pop (unsetenv) leaves the bytes in the initial environment block, which
    # /proc/PID/environ shows to every process of the same user for the whole run.
    env = {**os.environ, "ECT_CANARY_KEY": canary, "ECT_AFTER": "kept"}
    with subprocess.Popen([sys.executable, "-c", _HOLDER, canary], env=env, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
                          ) as proc:
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "loaded"
            with open(f"/proc/{proc.pid}/environ", "rb") as f:
                block = f.read()
            assert canary.encode() not in block
            assert b"ECT_CANARY_KEY" not in block
            assert b"ECT_AFTER=kept" in block  # the other entries are untouched
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "still held"
        finally:
            proc.kill()
