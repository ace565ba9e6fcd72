"""Starting the server: tokens files, auth modes, the bind check, the CLI, Unix sockets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import mindfile
from mindfile.cli.main import cli
from mindfile.errors import ConfigError
from mindfile.server import Authenticator, ServerSettings, check_bind, load_tokens
from mindfile.server.auth import Principal, is_loopback
from mindfile.server.run import resolve_auth

from ._support import LiveServer

TOKEN = "s3cret-token-for-tests-0001"


def test_tokens_file_json_and_toml(tmp_path: Path) -> None:
    as_json = tmp_path / "tokens.json"
    as_json.write_text(
        json.dumps({"tokens": {TOKEN: {"user": "alice", "agents": ["a1", "a2"]}, "x" * 20: "bob"}})
    )
    auth = load_tokens(as_json)
    assert auth.authenticate(f"Bearer {TOKEN}") == Principal("alice", ("a1", "a2"))
    assert auth.authenticate("Bearer " + "x" * 20) == Principal("bob")
    assert auth.authenticate("Bearer " + "y" * 20) is None
    assert auth.users == ["alice", "bob"]
    as_toml = tmp_path / "tokens.toml"
    as_toml.write_text(f'[tokens."{TOKEN}"]\nuser = "carol"\nagents = ["c"]\n')
    assert load_tokens(as_toml).authenticate(f"Bearer {TOKEN}") == Principal("carol", ("c",))


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("{}", "must map tokens"),
        ('{"short": "alice"}', "at least 16"),
        (json.dumps({TOKEN: {"user": ""}}), "user"),
        (json.dumps({TOKEN: {"user": "a", "role": "admin"}}), "unknown keys"),
        (json.dumps({TOKEN: {"user": "a", "agents": "x"}}), "agents"),
        (json.dumps({TOKEN: 5}), "expected"),
    ],
)
def test_bad_tokens_files_never_echo_a_token(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=needle) as info:
        load_tokens(path)
    assert TOKEN not in str(info.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_tokens(tmp_path / "missing.json")


def test_auth_modes() -> None:
    single = resolve_auth(None, user="ann", environ={"MINDFILE_API_TOKEN": TOKEN})
    assert single.required and single.authenticate(f"Bearer {TOKEN}") == Principal("ann")
    assert resolve_auth(None, environ={"MINDFILE_API_TOKEN": TOKEN}).users == ["default"]
    none = resolve_auth(None, environ={})
    assert not none.required and none.authenticate(None) == Principal("default")
    with pytest.raises(ConfigError, match="not both"):
        resolve_auth("tokens.json", environ={"MINDFILE_API_TOKEN": TOKEN})
    with pytest.raises(ConfigError, match="at least 16"):
        resolve_auth(None, environ={"MINDFILE_API_TOKEN": "short"})


def test_bind_check() -> None:
    open_auth, token_auth = Authenticator.none(), Authenticator.single(TOKEN)
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
        check_bind(host, None, open_auth)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host), host
        with pytest.raises(ConfigError, match="without authentication"):
            check_bind(host, None, open_auth)
        check_bind(host, None, token_auth)
    check_bind(None, "/tmp/mindfile.sock", open_auth)


def test_cli_refuses_a_public_address_without_auth(tmp_path: Path) -> None:
    env = {"MINDFILE_API_TOKEN": ""}
    result = CliRunner().invoke(
        cli, ["serve", "--db", str(tmp_path / "x.db"), "--host", "0.0.0.0"], env=env
    )
    assert result.exit_code == ConfigError.exit_code, result.output
    assert "refusing to listen on '0.0.0.0' without authentication" in result.output
    assert not (tmp_path / "x.db").exists()  # refused before opening anything


def test_cli_reports_a_bad_store_in_one_line(tmp_path: Path) -> None:
    env = {"MINDFILE_API_TOKEN": ""}
    missing = tmp_path / "missing.db"
    result = CliRunner().invoke(cli, ["serve", "--db", str(missing), "--read-only"], env=env)
    assert result.exit_code == 4, result.output  # NotFoundError
    assert "error [not_found]" in result.output and "Traceback" not in result.output
    with mindfile.open(tmp_path / "hash.db", embedder="hash"):
        pass
    result = CliRunner().invoke(
        cli, ["serve", "--db", str(tmp_path / "hash.db"), "--embedder", "static"], env=env
    )
    assert result.exit_code == ConfigError.exit_code, result.output
    assert "error [config]" in result.output


def test_unauthenticated_server_answers_only_localhost(tmp_path: Path) -> None:
    with (
        mindfile.open(tmp_path / "open.db", embedder="hash") as mem,
        LiveServer(ServerSettings(engine=mem)) as live,
        httpx.Client() as client,
    ):
        ok = client.post(live.url + "/v1/sessions/s/events", json={"sequence": 1, "payload": "hi"})
        assert ok.status_code == 201
        rebound = client.get(live.url + "/v1/sessions", headers={"Host": "evil.example"})
        assert rebound.status_code == 403
        assert rebound.json()["error"]["code"] == "forbidden"
        local = client.get(live.url + "/v1/sessions", headers={"Host": "localhost:1234"})
        assert local.json()["sessions"][0]["user_id"] == "default"


def test_core_import_does_not_need_fastapi() -> None:
    code = (
        "import sys, mindfile, mindfile.cli.main;"
        "names = ('fastapi', 'uvicorn', 'starlette', 'mindfile.server');"
        "bad = [m for m in names if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="Unix sockets")
def test_cli_serves_on_a_unix_socket(tmp_path: Path) -> None:
    sock = tmp_path / "mf.sock"
    db = tmp_path / "cli.db"
    env = {**os.environ, "MINDFILE_API_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mindfile", "serve", "--db", str(db), "--uds", str(sock)),
            *("--embedder", "hash", "--user", "ann", "--no-access-log"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, base_url="http://mindfile") as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.05)
            assert sock.stat().st_mode & 0o777 == 0o600
            headers = {"Authorization": f"Bearer {TOKEN}"}
            stored = client.post(
                "/v1/sessions/c/events", json={"sequence": 1, "payload": "hi"}, headers=headers
            )
            assert stored.status_code == 201, stored.text
            assert client.get("/v1/sessions").status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    # uvicorn shuts down cleanly, then re-raises the signal it caught.
    assert proc.returncode in (0, -signal.SIGTERM), out.decode()
    assert "Application shutdown complete" in out.decode()
    assert TOKEN not in out.decode()
    assert not sock.exists()
    with mindfile.open(db, read_only=True) as mem:  # closed cleanly, and it was ann's
        assert [s.user_id for s in mem.list_sessions()] == ["ann"]


def test_background_indexing_worker_and_public_metrics(store_location: str) -> None:
    """On both backends (tests/conftest.py): the HTTP API and its indexing worker."""
    auth = Authenticator.single(TOKEN, "ann")
    with (
        mindfile.open(store_location, embedder="hash", indexing="background") as mem,
        LiveServer(
            ServerSettings(engine=mem, auth=auth, indexing="background", public_metrics=True)
        ) as live,
        live.client(TOKEN) as client,
    ):
        stored = client.post("/v1/sessions/bg/events", json={"sequence": 1, "payload": "queued"})
        assert stored.status_code == 201
        deadline = time.monotonic() + 20
        while True:
            metrics = httpx.get(live.url + "/metrics").text  # no token: public
            if 'mindfile_jobs{status="done"} 1' in metrics:
                break
            assert time.monotonic() < deadline, metrics
            time.sleep(0.05)
        assert "mindfile_jobs_lag_seconds 0" in metrics
        hits = client.post("/v1/search", json={"query": "queued", "mode": "vector"}).json()
        assert hits["hits"][0]["text"] == "queued" and hits["degraded"] is None
        assert httpx.get(live.url + "/v1/sessions").status_code == 401  # only metrics are public


def test_serve_without_the_extra_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['fastapi'] = None;"  # as if it were not installed
        "from mindfile.cli.main import cli;"
        "cli(['serve', '--db', ':memory:'])"
    )
    env = {**os.environ, "MINDFILE_API_TOKEN": ""}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 8, done.stderr  # BackendUnavailableError
    assert 'pip install "mindfile[server]"' in done.stderr
    assert "Traceback" not in done.stderr
