"""``ckptlint check``'s own command-line parser (ckptlint.cli.argv) against typer's: on every command
line it accepts, the command gets the same values as from typer; what it does not accept goes to
typer (help, errors, other spellings)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import typer

from ckptlint.cli import argv, check
from ckptlint.cli.common import to_typer


def _typer_kwargs(args: list[str]) -> dict:
    got: dict = {}

    def capture(**kwargs):
        got.update(kwargs)

    capture.__signature__ = inspect.signature(check.check)  # type: ignore[attr-defined]
    capture.__annotations__ = dict(check.check.__annotations__)
    capture.__name__ = "check"
    app = typer.Typer(add_completion=False)
    app.command()(to_typer(capture))
    typer.main.get_command(app).main(args=args, prog_name="ckptlint", standalone_mode=False)
    return got


ACCEPTED = [
    ["ckpt"],
    ["ckpt", "other", "hf://org/repo@main"],
    ["-"],
    ["--", "-odd-name", "--tp"],
    ["ckpt", "--format", "json", "-q"],
    ["-f", "sarif", "ckpt", "-o", "out.sarif", "--report", "markdown:s.md", "--report", "json:r.json"],
    ["-t", "sglang==0.5.23", "--target", "vllm>=0.30", "ckpt", "-t", "vllm"],
    ["ckpt", "--select", "QD", "--select", "SC5,MT", "--ignore", "IX", "--extend-select", "DP806"],
    ["ckpt", "--fail-on", "warning", "--color", "never", "--baseline", "b.json"],
    ["ckpt", "--write-baseline", "b.json", "--config", "ckptlint.toml", "--isolated"],
    ["ckpt", "--speculative", "--no-speculative"],
    ["ckpt", "--no-speculative", "--speculative"],
    ["ckpt", "--platform", "rocm", "--tp", "8", "--ep", "8", "--gpu", "mi300x", "--dp-attention"],
    ["ckpt", "--disable-shared-experts-fusion", "--tp", "4", "--tp", "2"],
    ["ckpt", "--kv-cache-fraction", "0.25", "--endpoint", "http://127.0.0.1:9"],
    ["ckpt", "--kv-cache-fraction", "0"],
    ["ckpt", "--kv-cache-fraction", "0.9", "--format", "text", "--format", "github"],
    ["ckpt", "--quiet", "--quiet", "-q"],
]


@pytest.mark.parametrize("args", ACCEPTED, ids=" ".join)
def test_parses_as_typer_does(args):
    ours = argv.parse(check.check, args)
    assert ours is not None
    assert ours == _typer_kwargs(args)


DECLINED = [
    [],  # no checkpoint: typer's usage error
    ["--help"],
    ["ckpt", "--help"],
    ["ckpt", "-o", "--help"],  # a value that looks like an option
    ["--format=json", "ckpt"],  # typer reads this spelling; this parser leaves it to typer
    ["-qf", "json", "ckpt"],
    ["-fjson", "ckpt"],
    ["ckpt", "--format", "JSON"],
    ["ckpt", "--format"],
    ["ckpt", "--nope"],
    ["ckpt", "-x"],
    ["ckpt", "--tp", "0"],
    ["ckpt", "--tp", "+8"],
    ["ckpt", "--tp", " 8"],
    ["ckpt", "--tp", "1_0"],
    ["ckpt", "--tp", "08"],
    ["ckpt", "--tp", "eight"],
    ["ckpt", "--ep", "-1"],
    ["ckpt", "--kv-cache-fraction", "0.95"],
    ["ckpt", "--kv-cache-fraction", "1e-1"],
    ["ckpt", "--kv-cache-fraction", ".5"],
    ["ckpt", "--platform", "metal"],
    ["ckpt", "--color", "sometimes"],
    ["ckpt", "--fail-on", "fatal"],
]


@pytest.mark.parametrize("args", DECLINED, ids=lambda a: " ".join(a) or "(none)")
def test_leaves_the_rest_to_typer(args):
    assert argv.parse(check.check, args) is None


def test_shell_completion_is_left_to_typer(monkeypatch):
    monkeypatch.setenv("_CKPTLINT_COMPLETE", "bash_complete")
    assert argv.parse(check.check, ["ckpt"]) is None


def test_check_does_not_import_typer():
    code = ("import sys\nfrom ckptlint import cli\ntry:\n    cli.main(['check', 'fixtures/glm5-quark-mxfp4-mtp-exclude-prefix', "
            "'-f', 'json', '-q'])\nexcept SystemExit as e:\n    code = e.code\n"
            "sys.stderr.write(repr((code, sorted(m for m in ('typer', 'click') if m in sys.modules))))")
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=60)
    assert out.stderr.strip().endswith("[])"), out.stderr
    # and a command line it leaves to typer still gets typer's answer
    out = subprocess.run([sys.executable, "-m", "ckptlint", "check", "--tp", "0", "x"], capture_output=True, text=True,
                         cwd=root, timeout=60)
    assert out.returncode == 2 and "Invalid value for '--tp'" in out.stderr, out.stderr


def test_help_only_settings_do_not_send_a_command_line_to_typer():
    """A declaration with help-only settings (``metavar``, ``rich_help_panel``) is still parsed here,
    with the values typer gives."""
    from typing import Annotated, Optional

    from ckptlint.cli.common import Argument, Option

    def cmd(path: Annotated[list[str], Argument(help="p")],
            target: Annotated[Optional[list[str]], Option("--target", "-t", metavar="SPEC",
                                                          rich_help_panel="Targets", help="t")] = None,
            tp: Annotated[Optional[int], Option("--tp", min=1, metavar="N", rich_help_panel="Deployment")] = None):
        pass

    import typing

    # (this module's annotations are strings: evaluate them as a command module's are)
    cmd.__annotations__ = typing.get_type_hints(cmd, include_extras=True, localns=locals())
    args = ["ckpt", "-t", "vllm>=0.24", "--tp", "2", "-t", "sglang"]
    ours = argv.parse(cmd, args)
    assert ours == {"path": ["ckpt"], "target": ["vllm>=0.24", "sglang"], "tp": 2}
    got: dict = {}

    def capture(**kwargs):
        got.update(kwargs)

    capture.__signature__ = inspect.signature(cmd)  # type: ignore[attr-defined]
    capture.__annotations__ = dict(cmd.__annotations__)
    capture.__name__ = "cmd"
    app = typer.Typer(add_completion=False)
    app.command()(to_typer(capture))
    typer.main.get_command(app).main(args=args, prog_name="ckptlint", standalone_mode=False)
    assert got == ours
    assert argv.parse(cmd, ["ckpt", "--tp", "0"]) is None  # (still leaves a refused value to typer)
