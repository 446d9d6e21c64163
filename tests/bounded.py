"""Run the ckptlint command line in a child process under a time and memory budget, and measure both.

The adversarial corpus asserts, per case, the exit code, a one-line message without a traceback, the
wall time and the child's peak resident memory (``ru_maxrss`` of that child alone, from ``wait4``).
The child also runs under an address-space limit, so an input that makes ckptlint allocate without
bound fails fast (a MemoryError is exit 3) instead of taking the test machine with it.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
ADDRESS_SPACE_LIMIT = 2 << 30  # far above what any case needs (about 60-100 MiB resident)


@dataclass
class Outcome:
    code: int | None  # None: killed at the time budget
    out: str
    err: str
    seconds: float
    peak_mib: float

    def assert_clean(self, codes=(1, 2), budget_s: float = 20.0, mem_mib: float = 400.0) -> None:
        assert self.code in codes, f"exit {self.code}\n{self.err}"
        assert self.seconds < budget_s, f"took {self.seconds:.1f} s"
        assert self.peak_mib < mem_mib, f"peak RSS {self.peak_mib:.0f} MiB"
        assert "Traceback" not in self.err and "internal error" not in self.err, self.err


def _limit() -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_cli(args: list[str], cwd: str | Path, budget_s: float = 30.0, env: dict | None = None) -> Outcome:
    full_env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "ckptlint", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, env=full_env, preexec_fn=_limit)
        code, usage = None, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > budget_s:
                os.kill(proc.pid, signal.SIGKILL)
                _, _, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.monotonic() - t0
        proc.returncode = code if code is not None else -9  # reaped above; keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return Outcome(code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                       seconds, usage.ru_maxrss / 1024)
