"""Release wheels and their unpacked Python sources, cached.

``source_dir("sglang", "0.5.23")`` returns a folder holding ``sglang/...`` (only the wheel's ``.py``
files). The wheel is fetched with ``pip download --no-deps`` into ``<cache>/wheels/`` (the layout of
``pip download -d``) unless it is already there; ``<cache>`` is ``$CKPTLINT_CONFORMANCE_CACHE`` or
``~/.cache/ckptlint/conformance``. Nothing here runs in normal CI (tests/conformance is opt-in).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ENV = "CKPTLINT_CONFORMANCE_CACHE"
PACKAGES = {"sglang": "sglang", "vllm": "vllm"}


class WheelUnavailable(RuntimeError):
    """The release's wheel is neither cached nor downloadable (offline, or not published)."""


def cache_dir() -> Path:
    env = os.environ.get(ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ckptlint" / "conformance"


def cached_wheel(framework: str, version: str) -> Path | None:
    wheels = cache_dir() / "wheels"
    found = sorted(wheels.glob(f"{PACKAGES[framework]}-{version}-*.whl")) if wheels.is_dir() else []
    return found[0] if found else None


def wheel_path(framework: str, version: str, *, download: bool = True) -> Path:
    """The cached wheel of ``framework==version``, downloaded first when missing (``download``)."""
    whl = cached_wheel(framework, version)
    if whl is not None:
        return whl
    if not download:
        raise WheelUnavailable(f"{framework}=={version}: no wheel in {cache_dir() / 'wheels'} (downloads disabled)")
    dest = cache_dir() / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest), f"{framework}=={version}"]
    for extra in (["--only-binary=:all:"], []):
        r = subprocess.run(base + extra, capture_output=True, text=True)
        whl = cached_wheel(framework, version)
        if r.returncode == 0 and whl is not None:
            return whl
    raise WheelUnavailable(f"{framework}=={version}: pip download failed: {r.stderr.strip()[-500:]}")


def source_dir(framework: str, version: str, *, download: bool = True) -> Path:
    """A folder holding the release's package sources (``<cache>/<framework>-<version>/``)."""
    pkg = PACKAGES[framework]
    dest = cache_dir() / f"{framework}-{version}"
    if (dest / pkg).is_dir() and (dest / pkg / "__init__.py").is_file():
        return dest
    whl = wheel_path(framework, version, download=download)
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            if n.endswith(".py") and n.startswith(pkg + "/") and ".." not in n.split("/"):
                z.extract(n, tmp)
    dest.mkdir(parents=True, exist_ok=True)
    for p in sorted(tmp.rglob("*.py")):
        target = dest / p.relative_to(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(p, target)
    _rmtree(tmp)
    return dest


def _rmtree(p: Path) -> None:
    import shutil

    shutil.rmtree(p, ignore_errors=True)
