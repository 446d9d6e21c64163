"""The CI examples of docs/ci.md, run: the Action (action.yml, installed as it installs itself), the
hand-written workflow's steps, the pre-commit configuration and the registry commands. Each passes
on the shipped fixed fixture and fails on the broken one, as the page says."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the test extra)")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ci.md"
FIXED = "fixtures/glm5-quark-mxfp4-mtp-exclude-prefix-fixed"
BUGGY = "fixtures/glm5-quark-mxfp4-mtp-exclude-prefix"
BIN = Path(sys.executable).parent  # the test environment's ckptlint console script lives here
SARIF_SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())


def example(name: str) -> str:
    """The code block that follows ``<!-- ci-docs-test: NAME -->`` in docs/ci.md."""
    m = re.search(rf"<!-- ci-docs-test: {name} -->\n```[a-z]*\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert m, f"docs/ci.md has no example {name!r}"
    return m.group(1)


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A repository root like the user's: the fixtures where the examples name them, nothing else."""
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    return tmp_path


def github_env(tmp: Path) -> dict[str, str]:
    for name in ("summary.md", "output.txt"):
        (tmp / name).write_text("")
    temp = tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    return {**os.environ, "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"), "GITHUB_OUTPUT": str(tmp / "output.txt"),
            "RUNNER_TEMP": str(temp), "GITHUB_ACTION_PATH": str(ROOT), "COLUMNS": "100",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def outputs(tmp: Path) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in (tmp / "output.txt").read_text().splitlines() if "=" in ln)


def bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    # GitHub runs `run:` steps as `bash --noprofile --norc -eo pipefail {0}`
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


# --- the Action ----------------------------------------------------------------------------------

def _expand(text: str, inputs: dict[str, str], env: dict[str, str], steps: dict[str, dict[str, str]]) -> str:
    def sub(m: re.Match) -> str:
        expr = m.group(1).strip()
        if expr.startswith("inputs."):
            return inputs[expr[len("inputs."):]]
        if expr == "runner.temp":
            return env["RUNNER_TEMP"]
        if expr == "github.action_path":
            return env["GITHUB_ACTION_PATH"]
        s = re.fullmatch(r"steps\.(\w+)\.outputs\.([\w-]+)", expr)
        if s:
            return steps.get(s.group(1), {}).get(s.group(2), "")
        raise AssertionError(f"unexpected expression {expr!r}")
    return re.sub(r"\$\{\{(.*?)\}\}", sub, text)


def _condition(cond: str, inputs: dict[str, str], steps: dict[str, dict[str, str]]) -> bool:
    """The few `if:` expressions action.yml uses, evaluated as GitHub does."""
    expr = re.sub(r"^\$\{\{(.*)\}\}$", r"\1", cond.strip()).strip()
    expr = expr.replace("always()", "True").replace("&&", " and ")
    expr = re.sub(r"inputs\.([\w-]+)", lambda m: repr(inputs[m.group(1)]), expr)
    expr = re.sub(r"steps\.(\w+)\.outputs\.([\w-]+)", lambda m: repr(steps.get(m.group(1), {}).get(m.group(2), "")), expr)
    return bool(eval(expr, {"__builtins__": {}}, {"True": True}))  # noqa: S307 - our own file's expressions


def run_action(with_: dict[str, str], tmp: Path, cwd: Path, install: bool) -> dict:
    """Run action.yml's steps as the runner would: `run` steps with bash, the upload step recorded."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs.update(with_)
    env = github_env(tmp)
    steps: dict[str, dict[str, str]] = {}
    result = {"uploaded": None, "failed": None, "log": ""}
    for step in action["runs"]["steps"]:
        if "if" in step and not _condition(step["if"], inputs, steps):
            continue
        if "uses" in step:
            assert step["uses"].startswith("github/codeql-action/upload-sarif@")
            result["uploaded"] = _expand(step["with"]["sarif_file"], inputs, env, steps)
            continue
        if not install and step["name"] == "Install ckptlint":
            continue
        step_env = {**env, **{k: _expand(str(v), inputs, env, steps) for k, v in step.get("env", {}).items()}}
        if not install:
            step_env["CKPTLINT_BIN"] = str(BIN / "ckptlint")
        (tmp / "output.txt").write_text("")
        r = bash(step["run"], step_env, cwd)
        result["log"] += r.stdout + r.stderr
        if step.get("id"):
            steps[step["id"]] = outputs(tmp)
        if r.returncode != 0:
            result["failed"] = step["name"], r.returncode
            break
    result["outputs"] = steps.get("check", {})
    result["summary"] = (tmp / "summary.md").read_text()
    return result


def _action_inputs() -> dict[str, str]:
    wf = yaml.safe_load(example("action"))
    (step,) = [s for s in wf["jobs"]["ckptlint"]["steps"] if "ckptlint@" in s.get("uses", "")]
    return {k: str(v) for k, v in step["with"].items()}


def test_action_manifest_is_consistent():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    declared = set(action["inputs"])
    used = set(re.findall(r"inputs\.([\w-]+)", (ROOT / "action.yml").read_text()))
    assert used <= declared and {"checkpoints", "targets"} <= used
    for step in action["runs"]["steps"]:
        if "run" in step:
            assert step.get("shell") == "bash"
            for path in re.findall(r"\$GITHUB_ACTION_PATH/([\w./-]+)", step["run"]):
                assert (ROOT / path).is_file(), path
            assert "${{" not in step["run"], "inputs go through env, never into the script text"
    assert set(_action_inputs()) <= declared


def test_documented_action_passes_on_the_fixed_fixture_and_installs_itself(workdir, tmp_path):
    """The whole Action, its install step included (a virtual environment with ckptlint from this
    repository, as `pip install $GITHUB_ACTION_PATH` does on a runner)."""
    with_ = {**_action_inputs(), "python": sys.executable}
    assert with_["checkpoints"] == FIXED
    res = run_action(with_, tmp_path, workdir, install=True)
    assert res["failed"] is None, res["log"][-3000:]
    assert res["outputs"]["exit-code"] == "0"
    assert "| `sglang==0.5.12` | 0 | 0 | 0 | 0 | ✅ loads |" in res["summary"]
    assert "| `vllm==0.24.0` | 0 | 0 | 0 | 0 | ✅ loads |" in res["summary"]
    sarif = json.loads(Path(res["uploaded"]).read_text())
    pytest.importorskip("jsonschema").validate(sarif, SARIF_SCHEMA)
    assert sarif["runs"][0]["results"] == []
    assert "::stop-commands::" in res["log"]


def test_documented_action_fails_on_the_broken_fixture(workdir, tmp_path):
    with_ = {**_action_inputs(), "checkpoints": BUGGY}
    res = run_action(with_, tmp_path, workdir, install=False)
    assert res["outputs"]["exit-code"] == "1" and res["failed"] == ("Fail on findings", 1)
    assert "| `sglang==0.5.15` | 2 | 0 | 0 | 0 | ❌ will not load |" in res["summary"]
    assert "| `vllm==0.24.0` | 1 | 0 | 0 | 0 | ❌ will not load |" in res["summary"]
    assert "| `sglang==0.5.16` | 0 | 0 | 0 | 0 | ✅ loads |" in res["summary"]
    sarif = json.loads(Path(res["uploaded"]).read_text())
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"QD401"}  # uploaded even though it fails
    assert re.search(r"^::error file=fixtures/glm5-quark-mxfp4-mtp-exclude-prefix/config.json,line=\d+",
                     res["log"], re.M)


def test_action_with_several_checkpoints_and_no_sarif(workdir, tmp_path):
    with_ = {**_action_inputs(), "checkpoints": f"{FIXED}\n{BUGGY}\n", "sarif": "false"}
    res = run_action(with_, tmp_path, workdir, install=False)
    assert res["outputs"]["exit-code"] == "1" and res["uploaded"] is None
    assert res["summary"].startswith("## ckptlint: 2 checkpoints, 1 failing")


# --- the hand-written workflow -------------------------------------------------------------------

def run_workflow(doc: str, tmp: Path, cwd: Path) -> tuple[list[tuple[str, int]], str]:
    wf = yaml.safe_load(doc)
    env = {**github_env(tmp), **{k: str(v) for k, v in wf.get("env", {}).items()}}
    done = []
    for step in wf["jobs"]["ckptlint"]["steps"]:
        run = step.get("run")
        if run is None:
            uses = step["uses"]
            if uses.startswith("github/codeql-action/upload-sarif"):
                assert step["if"] == "always() && hashFiles('ckptlint.sarif') != ''"
                if (cwd / step["with"]["sarif_file"]).exists():
                    pytest.importorskip("jsonschema").validate(
                        json.loads((cwd / step["with"]["sarif_file"]).read_text()), SARIF_SCHEMA)
                    done.append(("upload-sarif", 0))
            continue  # checkout / setup-python: the test environment is already set up
        if run.startswith(("git lfs pull", "pip install")):
            continue  # the fixtures are real files; ckptlint is installed in the test environment
        r = bash(run, env, cwd)
        done.append((step.get("name", run.split()[0]), r.returncode))
    return done, (tmp / "summary.md").read_text()


def test_documented_workflow_steps(workdir, tmp_path):
    doc = example("manual")
    assert f"CKPT: {FIXED}" in doc
    done, summary = run_workflow(doc, tmp_path, workdir)
    assert done == [("ckptlint", 0), ("upload-sarif", 0)]
    assert "✅ loads" in summary and "❌" not in summary
    done, summary = run_workflow(doc.replace(FIXED, BUGGY), tmp_path, workdir)
    assert done == [("ckptlint", 1), ("upload-sarif", 0)]  # the step fails after writing both reports
    assert "❌ will not load" in summary


# --- pre-commit and the registry commands --------------------------------------------------------

def test_documented_pre_commit_hook(workdir):
    cfg = yaml.safe_load(example("pre-commit"))
    (hook,) = cfg["repos"][0]["hooks"]
    manifest = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    entry = shlex.split(manifest[hook["id"]]["entry"])
    assert manifest[hook["id"]]["pass_filenames"] is False
    assert re.search(hook["files"], f"{FIXED}/config.json") and not re.search(hook["files"], f"{BUGGY}/config.json")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([*entry, *hook["args"]], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    args = [BUGGY if a == FIXED else a for a in hook["args"]]
    r = subprocess.run([*entry, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "QD401" in r.stdout


def test_documented_registry_commands(workdir):
    block = re.search(r"```bash\n(ckptlint check \$\(cat registry.txt\).*?)```", DOC.read_text(), re.S).group(1)
    (workdir / "registry.txt").write_text(f"{FIXED}\n{BUGGY}\n")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100"}
    check, upgrade = block.strip().splitlines()
    r = subprocess.run(["bash", "-c", check], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1  # the broken fixture fails
    lines = [json.loads(ln) for ln in (workdir / "verdicts.jsonl").read_text().splitlines()]
    assert [d["checkpoint"] for d in lines] == [FIXED, BUGGY]
    assert lines[1]["verdicts"]["sglang==0.5.15"]["verdict"] == "will-not-load"
    r = subprocess.run(["bash", "-c", upgrade], cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout  # nothing breaks: the broken one gets fixed
    assert "1 fixed, 1 unchanged" in r.stdout


# --- no verdict fails the gate by default (docs/ci.md "No verdict fails the gate") ---------------

def _newer_than_data(fw: str) -> str:
    from ckptlint.targets import known_versions, parse_version

    last = parse_version(known_versions(fw)[-1])
    return f"{fw}=={'.'.join(map(str, last[:-1] + (last[-1] + 1,)))}"


def test_action_fails_closed_on_a_release_with_no_verdict(workdir, tmp_path):
    newer = _newer_than_data("vllm")
    with_ = {**_action_inputs(), "targets": newer}
    res = run_action(with_, tmp_path, workdir, install=False)
    assert res["outputs"]["exit-code"] == "1" and res["failed"] == ("Fail on findings", 1)
    assert f"| `{newer}` | 0 | 0 | 0 | 1 | ❔ no verdict (release newer than the data) |" in res["summary"]
    assert f"::warning title=ckptlint no verdict ({newer})::" in res["log"]
    # relaxed with the documented argument
    res = run_action({**with_, "args": "--no-verdict pass"}, tmp_path, workdir, install=False)
    assert res["outputs"]["exit-code"] == "0" and res["failed"] is None, res["log"][-2000:]


def test_pre_commit_hooks_fail_closed_on_a_release_with_no_verdict(workdir, tmp_path):
    manifest = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    named = shlex.split(manifest["ckptlint"]["entry"])
    r = subprocess.run([*named, FIXED, "--target", _newer_than_data("sglang")], cwd=workdir, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "no verdict" in r.stdout, r.stdout + r.stderr
    # ckptlint-changed with a staged lone shard (no config.json beside it): container only, no verdict
    shard = sorted((ROOT / FIXED).glob("*.safetensors"))[0]
    (workdir / "weights").mkdir()
    (workdir / "weights" / shard.name).write_bytes(shard.read_bytes())
    changed = shlex.split(manifest["ckptlint-changed"]["entry"])
    r = subprocess.run([*changed, f"weights/{shard.name}"], cwd=workdir, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and "no verdict (container only, no config.json)" in r.stdout, r.stdout + r.stderr


def test_documented_fix_check(workdir):
    cmd = example("fix").strip()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run(["bash", "-c", cmd], cwd=workdir, env={**env, "CKPT": FIXED}, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout == "" and "nothing to fix" in r.stderr, r.stdout + r.stderr
    r = subprocess.run(["bash", "-c", cmd], cwd=workdir, env={**env, "CKPT": BUGGY}, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and r.stdout.startswith("--- a/config.json"), r.stderr
    body = [ln for ln in r.stdout.splitlines() if not ln.startswith(("+++", "---"))]
    assert sum(ln.startswith("+") for ln in body) - sum(ln.startswith("-") for ln in body) == 3  # three entries
    assert "re-checked with the change, releases it is for: loads:" in r.stderr
