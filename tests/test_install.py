"""What is shipped installs and runs: the wheel built from this source (offline: no build isolation, no
dependencies fetched) holds every data file of the package, and, installed in a fresh virtual
environment, runs ``ckptlint check`` with the compiled target data. The documented installs name
the repository (a git URL or a local checkout), never a package-index name the project does not
publish, and the version tag scheme the pins use matches the package version."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

import ckptlint
from ckptlint.targets import FRAMEWORKS, known_versions

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "ckptlint"
FIXED = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
TAG = f"v{ckptlint.__version__}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools", reason="building the wheel offline needs setuptools in the test environment")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(PKG, src / "src" / "ckptlint", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("ckptlint-*.whl")
    return whl


def _package_files() -> set[str]:
    """Every file of the package in the source tree that is not Python source (data the code reads)."""
    return {("ckptlint/" + p.relative_to(PKG).as_posix()) for p in PKG.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}


def test_wheel_holds_the_code_and_every_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = _package_files()
    assert "ckptlint/targets/data/compiled.json" in data and "ckptlint/hardware/compiled.json" in data
    assert data <= names, sorted(data - names)
    for fw in FRAMEWORKS:
        for v in known_versions(fw):
            assert f"ckptlint/targets/data/{fw}/{v}.toml" in names
    py = {"ckptlint/" + p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")}
    assert py <= names, sorted(py - names)
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> Path:
    """A new virtual environment with only the wheel installed in it; the dependencies (msgspec,
    pydantic, typer) are taken from the test environment's site-packages (offline), put after the
    environment's own, so ``ckptlint`` can only come from the wheel."""
    env_dir = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import msgspec  # noqa: F401 - where the dependencies are installed

    deps = Path(sys.modules["msgspec"].__file__).resolve().parents[1]
    Path(site, "zz-test-dependencies.pth").write_text(str(deps) + "\n")
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = env_dir / ("Scripts/ckptlint.exe" if os.name == "nt" else "bin/ckptlint")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_installed_wheel_runs_check(fresh, tmp_path):
    py = fresh / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    r = subprocess.run([str(py), "-c", "import ckptlint, ckptlint.targets as t; print(ckptlint.__file__); "
                        "print(t._compiled() is not None)"], cwd=tmp_path, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=120)
    assert r.returncode == 0, r.stderr
    where, compiled = r.stdout.split()
    assert Path(where).resolve().is_relative_to(fresh.resolve()) and compiled == "True"
    r = _run(fresh, "--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == f"ckptlint {ckptlint.__version__}"
    r = _run(fresh, "check", str(FIXED), "-t", "sglang>=0.5.12", "-f", "json", "-q", "--isolated", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {v["verdict"] for v in doc["verdicts"].values()} == {"loads"}
    r = _run(fresh, "check", str(BUGGY), "-t", "sglang==0.5.15", "--isolated", "-q", cwd=tmp_path)
    assert r.returncode == 1 and "QD401" in r.stdout
    r = _run(fresh, "targets", "-f", "json", cwd=tmp_path)
    assert r.returncode == 0
    listed = json.loads(r.stdout)
    assert len(listed if isinstance(listed, list) else listed.get("targets", listed)) == \
        sum(len(known_versions(fw)) for fw in FRAMEWORKS)


# --- what the docs tell users to install -------------------------------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "action.yml"]
_INDEX_INSTALL = re.compile(r"pip3?\s+install\s+(?:-\S+\s+)*[\"']?ckptlint(?![\w./-]*(?:/|\.git|@))", re.I)


def test_docs_never_install_ckptlint_from_a_package_index():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert not _INDEX_INSTALL.search(text), f"{doc.name}: {_INDEX_INSTALL.search(text).group(0)!r}"
        assert "ckptlint==0" not in text, doc.name


def test_version_tag_scheme_is_what_the_docs_pin():
    """Releases are tagged vMAJOR.MINOR.PATCH = the package version; the pre-commit `rev:` and the
    Action's `@REF` in docs/ci.md pin the current one."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == ckptlint.__version__ and re.fullmatch(r"\d+\.\d+\.\d+", version)
    ci = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert f"rev: {TAG}" in ci
    assert re.search(rf"uses: [\w.-]+/ckptlint@{re.escape(TAG)}\b", ci)
    assert re.search(rf"pip install \"?git\+https://\S+/ckptlint(?:\.git)?@{re.escape(TAG)}", ci)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "vMAJOR.MINOR.PATCH" in readme or "vMAJOR.MINOR.PATCH" in ci


def test_action_installs_its_own_copy_and_never_fails_on_the_upload():
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the test extra)")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    steps = {s["name"]: s for s in action["runs"]["steps"]}
    install = steps["Install ckptlint"]
    assert "${{ github.action_path }}" in str(install.get("env", {})) or "$GITHUB_ACTION_PATH" in install["run"]
    assert "install" not in action["inputs"]  # nothing but the Action's own copy
    upload = next(s for s in action["runs"]["steps"] if "upload-sarif" in s.get("uses", ""))
    major = re.fullmatch(r"github/codeql-action/upload-sarif@v(\d+)", upload["uses"])
    assert major and int(major.group(1)) >= 4  # v3 runs on Node 20, deprecated
    assert upload.get("continue-on-error") is True  # no code scanning / a fork's token: the job does not fail
