"""Console-script entry point: answers ``--version`` without importing the CLI, and ends the process
without tearing down the large heap a check of a big checkpoint leaves behind."""

import os
import sys


def main() -> None:
    args = sys.argv[1:]
    if args in (["--version"], ["-V"]):
        from ckptlint import __version__

        sys.stdout.write(f"ckptlint {__version__}\n")
        return
    early = _early_reading(args)
    from ckptlint import options
    from ckptlint.cli import main as cli_main

    options.KEEP_UNTIL_EXIT = []  # this process ends with os._exit: nothing needs freeing

    code: object = 0
    try:
        cli_main()
    except SystemExit as exc:
        code = exc.code
    if early:
        from ckptlint.forkread import close_early

        close_early()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed pipe must not turn into a traceback
        pass
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    os._exit(code)


# Options of `ckptlint check` that take a value as the next argument (a test keeps this in step
# with the command's definition in ckptlint.cli.check).
CHECK_VALUE_OPTIONS = frozenset({
    "--target", "-t", "--format", "-f", "--fail-on", "--select", "--ignore", "--extend-select", "--platform",
    "--tp", "--gpu", "--ep", "--output", "-o", "--config", "--baseline", "--write-baseline", "--endpoint",
    "--kv-cache-fraction", "--color", "--report", "--no-verdict",
})


def check_path(args: list[str]) -> str | None:
    """The checkpoint path of a ``check`` command line (``args`` after ``check``), or None (also when
    it names several checkpoints: those are read by worker processes, not here)."""
    paths: list[str] = []
    it = iter(args)
    for a in it:
        if a == "--":
            paths.extend(it)
            break
        if a.startswith("-") and a != "-":
            if a in CHECK_VALUE_OPTIONS:
                next(it, None)
            continue
        paths.append(a)
    return paths[0] if len(paths) == 1 else None


def _early_reading(args: list[str]) -> bool:
    """``ckptlint check DIR``: start reading DIR's shard headers before importing the command line
    and the reader (about 0.1 s of imports that a second CPU can spend reading; the child imports
    the reader itself). Only a guess at the path: the command takes the started reading if it
    opens the same directory."""
    if not args or args[0] != "check":
        return False
    path = check_path(args[1:])
    if path is None or path.startswith("hf://"):
        return False
    from ckptlint.forkread import start_early

    start_early(path)
    return True

