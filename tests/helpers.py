"""Shared helpers for the simulation/rule tests: build a synthetic checkpoint and check it."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

from ckptlint.deployment import Deployment
from ckptlint.engine import Report, check
from ckptlint.targets import list_targets, resolve
from ckptlint.testing.builder import write_checkpoint
from ckptlint.testing.models import Spec


def build(tmp_path: Path, spec: Spec, name: str = "ckpt", shards: int = 2, sparse: bool = True) -> Path:
    out = tmp_path / name
    out.mkdir(parents=True, exist_ok=True)
    write_checkpoint(out, config=spec.config, tensors=spec.tensors, shards=shards,
                     hf_quant_config=spec.hf_quant_config, sparse=sparse)
    return out


def run(path: Path, *targets: str, **deployment) -> Report:
    ts = [t for spec in targets for t in resolve(spec)] if targets else list_targets()
    return check(str(path), ts, Deployment(**deployment))


def by_target(report: Report, code: str | None = None) -> dict[str, list[tuple[str, str, str | None]]]:
    out: dict[str, list] = {t.id: [] for t in report.targets}
    for f in report.findings:
        if f.target is not None and (code is None or f.code == code):
            out[f.target].append((f.code, f.consequence.value, f.module))
    return out


def errors(report: Report, target: str) -> list:
    return [f for f in report.findings if f.target == target and f.severity.value == "error"]


def cli_run(capsys, *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    from ckptlint import cli

    try:
        cli.main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def run_python(*args: str, pythonpath: str, cwd: Path, timeout: float = 300,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run this interpreter in a child process with PYTHONPATH set (a copy of the package first), stdin
    closed. A child still running after `timeout` seconds gets SIGABRT, on which faulthandler prints
    every thread's Python stack, and the test fails with that stack instead of a bare TimeoutExpired."""
    full_env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONFAULTHANDLER": "1", **(env or {})}
    with subprocess.Popen([sys.executable, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            raise AssertionError(f"still running after {timeout} s: {' '.join(args)}\n"
                                 f"--- stdout (tail)\n{out[-3000:]}\n--- stderr (tail)\n{err[-6000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def module_name(path: Path, root: Path) -> str:
    """The dotted module name of ``path`` in the package directory ``root`` (``.../ckptlint``)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_base(node: ast.ImportFrom, path: Path, root: Path) -> str:
    """The absolute module a ``from ... import`` statement in ``path`` imports from (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    module = module_name(path, root)
    package = (module if path.name == "__init__.py" else module.rpartition(".")[0]).split(".")
    return ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))


def same_text(actual: str, expected: str, stale: str) -> None:
    """Fail, naming where they first differ, unless two (possibly megabyte, one-line) texts are equal.

    A bare ``assert a == b`` hands both strings to pytest's diff, which, where nothing truncates it (with
    the ``CI`` variable set), ran a character-level ndiff of a 1.4 MB line for over five minutes."""
    if actual == expected:
        return
    at = next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))
    lo = max(0, at - 120)
    raise AssertionError(f"{stale}\nfirst difference at character {at} of {len(actual)} (expected {len(expected)}):\n"
                         f"  file:     ...{actual[lo:at + 120]!r}\n  expected: ...{expected[lo:at + 120]!r}")
