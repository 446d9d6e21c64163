"""Console-script entry point: answers ``--version`` without importing the CLI, and ends the process
without tearing down the large heap a check of a big checkpoint leaves behind."""

import sys


def main() -> None:
    args = sys.argv[1:]
    if args in (["--version"], ["-V"]):
        from ckptlint import __version__

        sys.stdout.write(f"ckptlint {__version__}\n")
        return
    from ckptlint.cli import main as cli_main

    code: object = 0
    try:
        cli_main()
    except SystemExit as exc:
        code = exc.code
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed pipe must not turn into a traceback
        pass
    import os

    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    os._exit(code)
