"""What a CI gate relies on (issue 29): releases ckptlint could not predict have "no verdict", never
"loads", and fail the check unless relaxed; settings take target ranges and a range says what it
leaves out; ``fix`` makes one edit for several releases and exits 1 on a pending change;
contradictory options are usage errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptlint.targets import known_versions, parse_version, resolve_spec
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
FIXED = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"


def _newer_than_data(fw: str) -> str:
    last = parse_version(known_versions(fw)[-1])
    return f"{fw}=={'.'.join(map(str, last[:-1] + (last[-1] + 1,)))}"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)  # the shipped fixtures are small and not sparse
    return dst


def _json(capsys, *args):
    code, out, err = cli_run(capsys, "check", *args, "-f", "json", "-q", "--isolated")
    return code, (json.loads(out) if out else None), err


# --- no verdict ---------------------------------------------------------------------------------------

def test_lone_shard_has_no_verdict_and_fails_closed(tmp_path, capsys):
    shard = sorted(FIXED.glob("*.safetensors"))[0]
    lone = tmp_path / shard.name
    shutil.copyfile(shard, lone)
    code, doc, err = _json(capsys, str(lone))
    assert code == 1, err
    assert doc["findings"] == []
    for v in doc["verdicts"].values():
        assert v["verdict"] == "no-verdict" and v["no_verdict"]["why"] == "container-only"
        assert "no config.json" in v["no_verdict"]["reason"] and "loads" not in v["label"]
    assert "no verdict for" in err and "--no-verdict pass" in err
    code, out, err = cli_run(capsys, "check", str(lone), "-q", "--isolated")
    assert code == 1 and "no verdict (container only, no config.json)" in out
    assert not any(line.rstrip().endswith("  loads") for line in out.splitlines())
    # relaxed on the command line, or in the settings
    code, _, err = cli_run(capsys, "check", str(lone), "-q", "--isolated", "--no-verdict", "pass")
    assert code == 0, err
    (tmp_path / "ckptlint.toml").write_text('no-verdict = "pass"\n')
    code, _, err = cli_run(capsys, "check", str(lone), "-q", "--config", str(tmp_path / "ckptlint.toml"))
    assert code == 0, err
    # the command line wins over the settings
    code, _, _ = cli_run(capsys, "check", str(lone), "-q", "--config", str(tmp_path / "ckptlint.toml"),
                         "--no-verdict", "fail")
    assert code == 1


@pytest.mark.parametrize("fw", ["sglang", "vllm"])
def test_release_newer_than_the_data_has_no_verdict(capsys, fw):
    newer = _newer_than_data(fw)
    code, doc, err = _json(capsys, str(FIXED), "-t", newer)
    assert code == 1, err
    v = doc["verdicts"][newer]
    assert v["verdict"] == "no-verdict" and v["no_verdict"]["why"] == "not-verified"
    assert "newer than the newest verified" in v["no_verdict"]["reason"]
    # ignoring the rule that reports it does not turn it into "loads"
    code, doc, err = _json(capsys, str(FIXED), "-t", newer, "--ignore", "TG602")
    assert code == 1 and doc["verdicts"][newer]["verdict"] == "no-verdict"
    code, doc, err = _json(capsys, str(FIXED), "-t", newer, "--no-verdict", "pass")
    assert code == 0, err
    # the verified releases of the same checkpoint still load, and pass
    code, doc, err = _json(capsys, str(FIXED), "-t", f"{fw}=={known_versions(fw)[-1]}")
    assert code == 0 and doc["verdicts"][f"{fw}=={known_versions(fw)[-1]}"]["verdict"] == "loads"


def test_newer_release_that_fails_on_the_newest_rules_still_fails(capsys):
    """A defect the newest verified release's rules see is a verdict (will not load), not "no verdict"."""
    code, doc, _ = _json(capsys, str(BUGGY), "-t", "sglang==0.5.15", "-t", _newer_than_data("sglang"))
    assert code == 1
    assert doc["verdicts"]["sglang==0.5.15"]["verdict"] == "will-not-load"


def test_not_simulated_has_no_verdict(tmp_path, capsys):
    ck = _copy(FIXED, tmp_path / "ck")
    cfg = json.loads((ck / "config.json").read_text())
    del cfg["architectures"]
    (ck / "config.json").write_text(json.dumps(cfg, indent=2))
    code, doc, err = _json(capsys, str(ck))
    assert code == 1, err
    assert {v["verdict"] for v in doc["verdicts"].values()} == {"no-verdict"}
    assert {v["no_verdict"]["why"] for v in doc["verdicts"].values()} == {"not-simulated"}


@pytest.mark.parametrize("fmt", ["markdown", "github", "sarif", "text", "concise"])
def test_every_format_shows_no_verdict(tmp_path, capsys, fmt):
    newer = _newer_than_data("vllm")
    code, out, _ = cli_run(capsys, "check", str(FIXED), "-t", newer, "-f", fmt, "-q", "--isolated")
    assert code == 1
    if fmt == "sarif":
        run = json.loads(out)["runs"][0]
        assert run["properties"]["verdicts"][newer]["verdict"] == "no-verdict"
        notes = run["invocations"][0]["toolExecutionNotifications"]
        assert [n["descriptor"]["id"] for n in notes] == ["no-verdict"] and newer in notes[0]["message"]["text"]
    elif fmt == "github":
        assert f"::warning title=ckptlint no verdict ({newer})::no verdict (release newer than the data)" in out
        assert "1 release(s) with no verdict" in out
    elif fmt == "markdown":
        assert "❔ no verdict (release newer than the data)" in out and "✅" not in out
    elif fmt == "concise":
        assert out.splitlines()[-1].endswith("no verdict (release newer than the data): " + newer.replace("==", " "))
    else:
        assert "no verdict (release newer than the data)" in out


def test_many_checkpoints_matrix_marks_no_verdict(tmp_path, capsys):
    newer = _newer_than_data("vllm")
    code, out, _ = cli_run(capsys, "check", str(FIXED), str(BUGGY), "-t", newer, "-q", "--isolated")
    assert code == 1
    assert "? no verdict" in out  # the legend
    row = next(line for line in out.splitlines() if line.startswith(str(FIXED)) and line.rstrip().endswith("?"))
    assert "ok" not in row.split()


def test_upgrade_to_a_release_newer_than_the_data_is_unknown(capsys):
    newer = _newer_than_data("vllm")
    code, out, err = cli_run(capsys, "upgrade", str(FIXED), "--from", f"vllm=={known_versions('vllm')[-1]}",
                             "--to", newer, "--isolated")
    assert code == 1, err
    assert "UNKNOWN: not-verified" in out


# --- ranges -------------------------------------------------------------------------------------------

def test_settings_accept_ranges(tmp_path, capsys):
    ck = _copy(BUGGY, tmp_path / "ck")
    (tmp_path / "ckptlint.toml").write_text('target = ["sglang>=0.5.12"]\n')
    code, out, err = cli_run(capsys, "check", str(ck), "-f", "json", "-q", "--config", str(tmp_path / "ckptlint.toml"))
    assert code == 1, err
    doc = json.loads(out)
    want = [t.id for t in resolve_spec("sglang>=0.5.12")]
    assert doc["targets"] == want and want
    assert all(parse_version(t.partition("==")[2]) >= (0, 5, 12) for t in want)
    # open upwards: it says that newer releases are not verified
    assert any("newer sglang releases are not verified" in n for n in doc["target_notes"])
    # a bad range in the settings is still a usage error naming the file
    (tmp_path / "ckptlint.toml").write_text('target = ["sglang>=banana"]\n')
    code, _, err = cli_run(capsys, "check", str(ck), "--config", str(tmp_path / "ckptlint.toml"))
    assert code == 2 and "ckptlint.toml: target:" in err


def test_range_below_newer_verified_releases_says_so(capsys):
    versions = known_versions("sglang")
    assert len(versions) >= 2
    spec = f"sglang<{versions[-1]}"
    code, doc, err = _json(capsys, str(FIXED), "-t", spec)
    note = next(n for n in doc["target_notes"] if n.startswith(spec))
    assert f"the newer verified release(s) {versions[-1]} are not checked" in note
    assert note in err


# --- fix ----------------------------------------------------------------------------------------------

def test_fix_over_two_ranges_is_one_edit_that_loads_everywhere(tmp_path, capsys):
    ck = _copy(BUGGY, tmp_path / "ck")
    specs = ["vllm>=0.24", "sglang>=0.5.12"]
    args = [a for s in specs for a in ("-t", s)]
    before = (ck / "config.json").read_bytes()
    code, out, err = cli_run(capsys, "fix", str(ck), *args, "--isolated")
    assert code == 1, err  # a pending change (ruff's --diff convention); nothing written
    assert out.startswith("--- a/config.json\n") and (ck / "config.json").read_bytes() == before
    assert "re-checked with the change, releases it is for: loads:" in err
    code, out2, err = cli_run(capsys, "fix", str(ck), *args, "--isolated", "--diff")
    assert code == 1 and out2 == out
    code, out3, err = cli_run(capsys, "fix", str(ck), *args, "--isolated", "--write")
    assert code == 0, err
    assert out3 == out  # --write prints the diff it applied, as its help says
    assert (ck / "config.json.orig").read_bytes() == before
    # one edit: every release of both ranges now loads the checkpoint
    code, doc, err = _json(capsys, str(ck), *args)
    want = [t.id for s in specs for t in resolve_spec(s)]
    assert sorted(doc["verdicts"]) == sorted(want)
    assert {v["verdict"] for v in doc["verdicts"].values()} == {"loads"}, doc["verdicts"]
    assert code == 0
    # and there is nothing left to fix
    code, out, err = cli_run(capsys, "fix", str(ck), *args, "--isolated")
    assert code == 0 and out == "" and "nothing to fix" in err


def test_fix_help_matches_behaviour(capsys):
    code, out, _ = cli_run(capsys, "fix", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "instead of printing it" not in text
    assert "exit 1 when there is a change" in text


# --- contradictions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["plan", "inspect"])
def test_one_release_commands_refuse_two_targets(capsys, command):
    code, out, err = cli_run(capsys, command, str(FIXED), "-t", "sglang==0.5.15", "-t", "vllm==0.33.0")
    assert code == 2 and out == "" and "--target was given 2 times" in err


@pytest.mark.parametrize("command", ["check", "plan", "fix"])
def test_platform_contradicting_gpu_is_a_usage_error(capsys, command):
    code, out, err = cli_run(capsys, command, str(FIXED), "-t", "sglang==0.5.15", "--platform", "cuda",
                             "--gpu", "mi355x", "--isolated")
    assert code == 2 and "mi355x is a rocm GPU and --platform says cuda" in err
    code, _, err = cli_run(capsys, "check", str(FIXED), "-t", "sglang==0.5.15", "--platform", "rocm",
                           "--gpu", "mi355x", "--isolated", "-q")
    assert code == 0, err


# --- help ---------------------------------------------------------------------------------------------

def test_check_help_is_grouped_with_examples_and_exit_codes(capsys):
    from ckptlint.cli.common import PANEL_ORDER

    code, out, _ = cli_run(capsys, "check", "--help")
    assert code == 0
    heads = [line[:-1] for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert [h for h in heads if h in PANEL_ORDER] == list(PANEL_ORDER)
    assert "<str>" not in out and "<int" not in out and "<float" not in out
    section = {}
    current = None
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
        elif current and line.strip().startswith("-"):
            section.setdefault(line.split()[0].rstrip(","), current)
    assert section["-t"] == "Targets" and section["--gpu"] == "Deployment" and section["--baseline"] == "CI"
    assert section["--no-verdict"] == "CI" and section["-f"] == "Output" and section["--config"] == "Input"
    assert section["--select"] == "Rules"
    assert "Examples:" in out and "ckptlint check ./ckpt -t sglang==0.5.15 -t 'vllm>=0.24'" in out
    exits = out[out.index("Exit codes:"):]
    for n in "0123":
        assert f"\n    {n}  " in exits
    assert "--version" in out and "--debug" in out


def test_global_options_are_listed(capsys):
    code, out, _ = cli_run(capsys, "--help")
    assert code == 0 and "--version" in out and "--debug" in out and "Exit codes" in out
    code, out, _ = cli_run(capsys, "--version", "check")
    assert code == 0 and out.startswith("ckptlint ")


def test_generic_simulation_is_a_verdict_labelled_as_such(tmp_path, capsys):
    """TG604 (generic rules) and TG605 (facts extracted from the wheel) are simulations: a verdict (not
    "no verdict"), said in the label; a release with hand-written data for the architecture says neither."""
    from casefiles import build_case, discover

    cases = {c.id: c for c in discover()}
    labels = {}
    for cid, kind in (("TG604/registered-class-not-extracted", "generic"),
                      ("TG605/minimax-m2-fp8-extracted", "extracted")):
        case = cases[cid]
        root = tmp_path / kind
        build_case(case, root)
        target = case.data["targets"][0]
        code, doc, err = _json(capsys, str(root), "-t", target)
        v = doc["verdicts"][target]
        assert v.get(kind) is True and v["verdict"] != "no-verdict", v
        labels[kind] = v["label"]
    assert labels["generic"].endswith("(generic rules)") and labels["extracted"].endswith("(extracted data)")
    code, doc, err = _json(capsys, str(FIXED), "-t", "sglang==0.5.23")
    own = doc["verdicts"]["sglang==0.5.23"]
    assert "generic" not in own and "extracted" not in own and own["label"] == "loads"


@pytest.mark.parametrize("command", ["check", "upgrade", "plan", "fix", "inspect", "targets", "rules", "rule", "gpus"])
def test_no_type_placeholders_in_help(capsys, command):
    code, out, _ = cli_run(capsys, command, "--help")
    assert code == 0 and not any(p in out for p in ("<str>", "<int", "<float", "<path>"))
