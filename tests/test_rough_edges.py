"""Issue 16's rough edges, each as a user meets it: fix --diff, fix hf://… --write, --endpoint for
fix, help texts that name every accepted input, a plain 404 from a server that is not a Hub."""

from __future__ import annotations

import http.server
import shutil
import threading
from pathlib import Path

import pytest

from fakehub import FakeHub, QuietServer
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
T = "sglang==0.5.15"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def ckpt(tmp_path) -> Path:
    dst = tmp_path / "ck"
    shutil.copytree(BUGGY, dst)
    return dst


def test_fix_diff_prints_and_writes_nothing(ckpt, capsys):
    before = (ckpt / "config.json").read_bytes()
    code, out, err = cli_run(capsys, "fix", str(ckpt), "-t", T, "--diff", "--isolated")
    assert code == 1, err  # a pending change, as ruff's --diff
    assert out.startswith("--- a/config.json\n+++ b/config.json\n") and '+      "model.eh_proj"' in out
    assert (ckpt / "config.json").read_bytes() == before and not (ckpt / "config.json.orig").exists()
    code, out, err = cli_run(capsys, "fix", str(ckpt), "-t", T, "--diff", "--write", "--isolated")
    assert code == 2 and out == "" and "use one of them" in err
    assert (ckpt / "config.json").read_bytes() == before


def test_fix_of_a_hub_repository(ckpt, capsys):
    hub = FakeHub(ckpt).start()
    try:
        url = "hf://org/repo"
        # --write is refused before anything is read or printed
        code, out, err = cli_run(capsys, "fix", url, "-t", T, "--write", "--endpoint", hub.endpoint)
        assert code == 2 and out == "" and "fix --write edits files on disk" in err
        assert hub.log == []
        # the diff works, and --endpoint is honoured
        code, out, err = cli_run(capsys, "fix", url, "-t", T, "--endpoint", hub.endpoint)
        assert code == 1, err  # the change is pending
        assert '+      "model.eh_proj"' in out and hub.log
    finally:
        hub.stop()


@pytest.mark.parametrize("command", ["check", "plan", "fix", "inspect", "upgrade"])
def test_help_names_every_accepted_input(command, capsys):
    code, out, _ = cli_run(capsys, command, "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "hf://ORG/REPO[@REVISION]" in text
    assert ".safetensors" in text and "Checkpoint directory." not in text


def test_plain_404_server_is_not_called_a_directory(capsys):
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, *a):
            pass

    srv = QuietServer(("127.0.0.1", 0), NotFound)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        for command in (["check"], ["plan", "-t", T], ["inspect"]):
            code, out, err = cli_run(capsys, *command, "hf://org/repo", "--endpoint",
                                     f"http://127.0.0.1:{srv.server_address[1]}")
            assert code == 2, (command, err)
            assert "not a checkpoint directory" not in err
            assert "404 Not Found" in err and "no such repository or revision" in err
    finally:
        srv.shutdown()
        srv.server_close()
