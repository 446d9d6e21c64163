"""Run the ckptlint command line in a child process under a time and memory budget, and measure both.

The adversarial corpus asserts, per case, the exit code, a one-line message without a traceback, the
wall time and the child's peak resident memory. The peak is the child's own ``VmHWM`` (from
``/proc/self/status``, read by a small wrapper just before ckptlint ends the process): the high-water
mark of the program's own address space. ``ru_maxrss`` from ``wait4`` is the fallback (no procfs, or a
child killed at its time budget); it also counts the pages the child held as a fork of the test
process before ``exec``, so it reads at least the size of pytest itself (200 MiB and more late in a
full run). The child also runs under an address-space limit, so an input that makes ckptlint allocate
without bound fails fast (a MemoryError is exit 3) instead of taking the test machine with it.
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


# Runs ckptlint in the child as ``python -m ckptlint`` would, and writes the process's VmHWM (KiB) to
# the file named first when it ends (ckptlint ends with os._exit: that is wrapped too).
_BOOT = """
import atexit, os, runpy, sys
_path = sys.argv[1]
sys.argv = ["ckptlint", *sys.argv[2:]]
def _hwm():
    try:
        with open("/proc/self/status") as f:
            kib = next((ln.split()[1] for ln in f if ln.startswith("VmHWM:")), None)
        if kib:
            with open(_path, "w") as out:
                out.write(kib)
    except OSError:
        pass
_real_exit = os._exit
def _exit(code):
    _hwm()
    _real_exit(code)
os._exit = _exit
atexit.register(_hwm)
runpy.run_module("ckptlint", run_name="__main__", alter_sys=True)
"""


def _limit() -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_cli(args: list[str], cwd: str | Path, budget_s: float = 30.0, env: dict | None = None) -> Outcome:
    full_env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory() as scratch:
        hwm = Path(scratch) / "hwm"
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(hwm), *args], cwd=cwd, stdin=subprocess.DEVNULL,
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
        try:
            peak = int(hwm.read_text()) / 1024
        except (OSError, ValueError):
            peak = usage.ru_maxrss / 1024
        return Outcome(code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                       seconds, peak)
