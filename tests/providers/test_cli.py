"""`ect provider smoke` for every provider (the HTTP ones against a local server)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from runner.canonical import loads_strict
from runner.cli import cli
from tests.providers.conftest import gemini_ok, openai_ok
from tests.providers.fakeserver import Reply


def test_help():
    out = CliRunner().invoke(cli, ["provider", "smoke", "--help"])
    assert out.exit_code == 0
    for flag in (
        "--provider",
        "--base-url",
        "--model",
        "--credential-file",
        "--credential-env",
        "--json",
    ):
        assert flag in out.output


def test_simulated_needs_no_flags():
    out = CliRunner().invoke(cli, ["provider", "smoke", "--provider", "simulated"])
    assert out.exit_code == 0, out.output
    assert "[SIMULATED]" in out.output and "function call: get_metric" in out.output
    assert "attempt 1: status=200" in out.output


def test_simulated_json_is_deterministic():
    a = CliRunner().invoke(cli, ["provider", "smoke", "--json"])
    b = CliRunner().invoke(cli, ["provider", "smoke", "--json"])
    assert a.exit_code == 0
    ja, jb = json.loads(a.output), json.loads(b.output)
    assert ja["ok"] is True and ja["response"]["simulated"] is True
    assert ja["response"] == jb["response"]
    assert ja["attempts"][0]["request_sha256"] == jb["attempts"][0]["request_sha256"]


def test_gemini_smoke_against_local_server(server, credential_file, canary):
    server.play(Reply.json(gemini_ok()))
    out = CliRunner().invoke(
        cli,
        [
            "provider",
            "smoke",
            "--provider",
            "gemini",
            "--base-url",
            server.url,
            "--credential-file",
            str(credential_file),
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    assert canary not in out.output
    body = loads_strict(server.seen[0].body)
    assert body["generationConfig"]["temperature"] == 0.2
    assert "seed" in body["generationConfig"]
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_metric"
    assert json.loads(out.output)["response"]["function_calls"][0]["name"] == "get_metric"


def test_openai_smoke_failure_exits_runtime(server):
    server.play(*[Reply.json({"error": {"message": "down"}}, 503)] * 2)  # and its retry
    out = CliRunner().invoke(
        cli,
        [
            "provider",
            "smoke",
            "--provider",
            "openai",
            "--base-url",
            server.url + "/v1",
            "--model",
            "m",
        ],
    )
    assert out.exit_code == 5
    assert "server_error (HTTP 503)" in out.output


def test_openai_smoke_success(server):
    server.play(Reply.json(openai_ok()))
    out = CliRunner().invoke(
        cli,
        [
            "provider",
            "smoke",
            "--provider",
            "openai",
            "--base-url",
            server.url + "/v1",
            "--model",
            "m",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "function call: get_metric" in out.output


def test_usage_errors(tmp_path, credential_file):
    r = CliRunner()
    assert r.invoke(cli, ["provider", "smoke", "--provider", "gemini"]).exit_code == 2
    assert r.invoke(cli, ["provider", "smoke", "--provider", "openai"]).exit_code == 2
    assert (
        r.invoke(cli, ["provider", "smoke", "--credential-file", str(credential_file)]).exit_code
        == 2
    )
    credential_file.chmod(0o644)
    out = r.invoke(
        cli,
        ["provider", "smoke", "--provider", "gemini", "--credential-file", str(credential_file)],
    )
    assert out.exit_code == 2 and "chmod 600" in out.output
