"""`fix --write` keeps its promise (issue 18, item 6): a minimal textual edit, no change of a value's
type (GPTQ `dynamic` stays an object), read-only files and Hub paths refused, nothing but a named
temporary file left by a kill (and removed by the next run), "original saved" true under concurrent runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ckptlint.fix as fixmod
from ckptlint.fix import FixRefused, plan_fix, write_fix
from ckptlint.targets import resolve
from ckptlint.testing.models import DenseDims, all_linears, dense_spec, gptq_config
from bounded import SRC, run_cli
from helpers import build, cli_run, run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
T = "sglang==0.5.15"  # where the fixture needs model.eh_proj and model.decoder.mlp.experts excluded
TEMP_NAMES = (".config.json.ckptlint-", ".config.json.orig.ckptlint-")


@pytest.fixture
def ckpt(tmp_path) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(BUGGY, dst)  # small, not sparse
    return dst


def only_inserts(old: str, new: str) -> list[str]:
    """The one piece inserted into ``old`` to give ``new``; fails if anything of ``old`` was changed."""
    p = len(os.path.commonprefix([old, new]))
    s = len(os.path.commonprefix([old[p:][::-1], new[p:][::-1]]))
    assert old == new[:p] + new[len(new) - s:], "the edit changed or removed text, not only inserted"
    return [new[p:len(new) - s]]


def temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(TEMP_NAMES))


# --- minimal edit ------------------------------------------------------------------------------------

def test_edit_keeps_line_endings_numbers_escapes_and_order(ckpt):
    doc = json.loads((ckpt / "config.json").read_text())
    text = json.dumps(doc, indent=4).replace("\n", "\r\n") + "\r\n"
    # Number forms and escapes that a json.loads/json.dumps round trip would rewrite:
    text = text.replace('{\r\n', '{\r\n    "odd": [1.50E-05, 0.000010, 1e400, -0, 12345678901234567890123],\r\n'
                        '    "name": "caf\\u00e9 \\/ \\ud83d\\ude00",\r\n', 1)
    (ckpt / "config.json").write_bytes(text.encode())
    (t,) = resolve(T)
    fp = plan_fix(str(ckpt), t, others=[])
    assert fp.added == ["model.decoder.mlp.experts", "model.eh_proj"]
    write_fix(str(ckpt), fp)
    new = (ckpt / "config.json").read_bytes().decode()
    inserted = only_inserts(text, new)
    assert "".join(inserted) == ',\r\n            "model.decoder.mlp.experts",\r\n            "model.eh_proj"'
    assert errors_for(ckpt, T) == []
    assert (ckpt / "config.json.orig").read_bytes() == text.encode()


def test_inline_list_stays_inline(ckpt):
    doc = json.loads((ckpt / "config.json").read_text())
    text = json.dumps(doc, separators=(",", ":"))  # one line, no spaces, no final newline
    (ckpt / "config.json").write_text(text)
    (t,) = resolve(T)
    fp = plan_fix(str(ckpt), t, others=[])
    assert only_inserts(text, fp.new_text) == [',"model.decoder.mlp.experts","model.eh_proj"']


def errors_for(path: Path, target: str) -> list:
    return [(f.code, f.module) for f in run(path, target).findings
            if f.target == target and f.severity.value == "error"]


# --- never change the type of an existing value --------------------------------------------------------

def _gptq(tmp_path, name, **cfg) -> Path:
    # Layer 1's down_proj is stored BF16: SGLang needs it excluded through a `-:` dynamic rule.
    skip = lambda m: m.category in ("lm_head", "embed", "router") or m.path == "model.layers.1.mlp.down_proj"  # noqa: E731
    return build(tmp_path, dense_spec(DenseDims(), all_linears("gptq", skip=skip), gptq_config(**cfg)), name=name)


@pytest.mark.parametrize("dynamic", [{"-:lm_head": {}, "+:.*v_proj": {"bits": 4}}, {}, None, "absent"])
def test_gptq_dynamic_stays_an_object(tmp_path, dynamic):
    kw = {} if dynamic == "absent" else {"dynamic": dynamic}
    path = _gptq(tmp_path, "gptq", **kw)
    (t,) = resolve("sglang==0.5.23")
    assert errors_for(path, t.id) == [("QD401", "model.layers.1.mlp.down_proj")]
    fp = plan_fix(str(path), t, others=[])
    assert fp.added == [r"-:model\.layers\.1\.mlp\.down_proj$"] and fp.not_fixable == []
    write_fix(str(path), fp)
    qc = json.loads((path / "config.json").read_text())["quantization_config"]
    assert qc["dynamic"] == {**(dynamic if isinstance(dynamic, dict) else {}),
                             r"-:model\.layers\.1\.mlp\.down_proj$": {}}
    assert "dynamic:-" not in qc
    assert errors_for(path, t.id) == []  # and CF311 does not fire (it would on a list)


@pytest.mark.parametrize("release", ["sglang==0.5.5", "sglang==0.5.23"])  # vLLM infers the BF16 module unquantized
def test_gptq_dynamic_rule_goes_before_a_matching_positive_rule(tmp_path, release):
    # The first `dynamic` rule that matches decides (get_dynamic_override in SGLang
    # layers/quantization/utils.py and vLLM utils/gptq_utils.py): the `+:` rule naming every down_proj keeps
    # layer 1's BF16 down_proj quantized, and a `-:` rule appended after it would change nothing.
    dynamic = {"-:lm_head": {}, "+:.*mlp\\.down_proj": {"group_size": 128}, "+:.*v_proj": {"bits": 4}}
    path = _gptq(tmp_path, "gptq", dynamic=dynamic)
    text = (path / "config.json").read_text()
    (t,) = resolve(release)
    assert errors_for(path, t.id) == [("QD401", "model.layers.1.mlp.down_proj")]
    fp = plan_fix(str(path), t, others=[])
    new = r"-:model\.layers\.1\.mlp\.down_proj$"
    assert fp.added == [new] and fp.not_fixable == [] and fp.remaining == []
    write_fix(str(path), fp)
    qc = json.loads((path / "config.json").read_text())["quantization_config"]
    assert isinstance(qc["dynamic"], dict)
    assert list(qc["dynamic"].items()) == [("-:lm_head", {}), (new, {}), *list(dynamic.items())[1:]]
    # only the new member was inserted: the rest of the text is byte for byte what it was
    after = (path / "config.json").read_text()
    assert difflib_added(text, after) == [json.dumps(new) + ": {},"]
    assert errors_for(path, t.id) == []


def difflib_added(before: str, after: str) -> list[str]:
    """The lines ``after`` adds to ``before``; asserts that no line was removed or changed."""
    import difflib

    ops = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:2] in ("+ ", "- ")]
    assert all(op.startswith("+ ") for op in ops), ops
    return [op[2:].strip() for op in ops]


@pytest.mark.parametrize("key, value, kinds", [
    ("exclude", '"lm_head"', "a string, not a list"), ("exclude", '{"lm_head": 1}', "an object, not a list"),
    ("exclude", "3", "a number, not a list"), ("dynamic", '["-:lm_head"]', "a list, not an object"),
    ("dynamic", "true", "a boolean, not an object"),
])
def test_a_value_of_another_type_is_refused_not_replaced(key, value, kinds):
    # (The methods' parsers already reject these as CF311 before fix gets there; this is the backstop.)
    text = '{"quantization_config": {"quant_method": "x", "%s": %s}}' % (key, value)
    edit = fixmod._Edit(text, "config.json", key, [key])
    assert edit.refusal() == (f"`quantization_config.{key}` in config.json is {kinds}: ckptlint only adds entries "
                              "and never replaces a value of another type; fix it by hand")


def test_null_counts_as_absent(ckpt):
    doc = json.loads((ckpt / "config.json").read_text())
    doc["quantization_config"]["exclude"] = None
    (ckpt / "config.json").write_text(json.dumps(doc, indent=2) + "\n")
    (t,) = resolve(T)
    fp = plan_fix(str(ckpt), t, others=[])
    write_fix(str(ckpt), fp)
    assert json.loads((ckpt / "config.json").read_text())["quantization_config"]["exclude"] == fp.added
    assert errors_for(ckpt, T) == []


def test_an_edit_that_would_break_the_config_is_refused(ckpt, monkeypatch):
    real = fixmod._Edit.apply

    def breaks(self, additions):
        doc, text, added = real(self, additions)
        doc["quantization_config"]["exclude"] = ",".join(doc["quantization_config"]["exclude"])
        return doc, text, added

    monkeypatch.setattr(fixmod._Edit, "apply", breaks)
    (t,) = resolve(T)
    fp = plan_fix(str(ckpt), t, others=[])
    assert fp.diff == "" and fp.not_fixable
    assert all("would fail CF311" in why for _, why in fp.not_fixable)


# --- refusals ----------------------------------------------------------------------------------------

def test_read_only_file_needs_force(ckpt, capsys):
    (ckpt / "config.json").chmod(0o444)
    before = (ckpt / "config.json").read_bytes()
    code, out, err = cli_run(capsys, "fix", str(ckpt), "-t", T, "--write")
    assert code == 2 and "read-only (mode 0444); pass --force" in err and "was not changed" in err
    assert (ckpt / "config.json").read_bytes() == before and not (ckpt / "config.json.orig").exists()
    code, out, err = cli_run(capsys, "fix", str(ckpt), "-t", T, "--write", "--force")
    assert code == 0, err
    assert (ckpt / "config.json").stat().st_mode & 0o777 == 0o444  # forced, and still read-only
    assert (ckpt / "config.json.orig").read_bytes() == before


def test_hub_paths_are_refused_before_anything_is_read(tmp_path):
    # The endpoint is a closed port: had ckptlint tried the network, it would say so (or hang).
    r = run_cli(["fix", "hf://org/model", "-t", T, "--write"], cwd=tmp_path,
                env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"})
    r.assert_clean(codes=(2,), budget_s=10, mem_mib=200)
    assert r.out == "" and "hf://org/model is a Hugging Face Hub repository" in r.err
    assert len(r.err.strip().splitlines()) == 1


# --- kill at any point: what remains, and the next run cleans up ---------------------------------------

KILLED_WRITER = textwrap.dedent("""
    import os, sys, time
    from ckptlint.fix import plan_fix, write_fix
    from ckptlint.targets import resolve
    path, nth, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    (t,) = resolve("sglang==0.5.15")
    fp = plan_fix(path, t, others=[])
    real, calls = os.fsync, []
    def fsync(fd):
        real(fd)
        calls.append(fd)
        if len(calls) == nth:  # stop here, mid-write, until killed
            open(marker, "w").close()
            time.sleep(60)
    os.fsync = fsync
    write_fix(path, fp)
""")


@pytest.mark.parametrize("nth, orig_done", [(1, False), (2, True)], ids=["writing-orig", "writing-config"])
def test_sigkill_mid_write_leaves_whole_files_and_a_named_temp(ckpt, tmp_path, nth, orig_done):
    original = (ckpt / "config.json").read_bytes()
    marker = tmp_path / "stopped"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(ckpt), str(nth), str(marker)],
                            env={**os.environ, "PYTHONPATH": SRC})
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The file is whole (still the original: the rename did not happen), the .orig whole or absent,
    # and what remains is one temporary file named after the file and the killed process.
    assert (ckpt / "config.json").read_bytes() == original
    assert (ckpt / "config.json.orig").exists() is orig_done
    if orig_done:
        assert (ckpt / "config.json.orig").read_bytes() == original
    left = temps(ckpt)
    name = ".config.json.orig" if nth == 1 else ".config.json"
    assert left == [f"{name}.ckptlint-{proc.pid}.tmp"]
    # The next run removes it and says so.
    r = run_cli(["fix", str(ckpt), "-t", T, "--write"], cwd=tmp_path)
    assert r.code == 0, r.err
    assert f"removed {left[0]}, left by an interrupted ckptlint run" in r.err
    assert temps(ckpt) == []
    assert (ckpt / "config.json.orig").read_bytes() == original
    assert errors_for(ckpt, T) == []


def test_a_temp_of_a_running_process_is_left_alone(ckpt):
    other = ckpt / f".config.json.ckptlint-{os.getppid()}.tmp"  # the parent process is alive
    other.write_text("x")
    (t,) = resolve(T)
    notes = write_fix(str(ckpt), plan_fix(str(ckpt), t, others=[]))
    assert other.exists() and not any("removed" in n for n in notes)


# --- concurrent runs ---------------------------------------------------------------------------------

def test_a_file_changed_since_it_was_read_is_not_overwritten(ckpt):
    (t,) = resolve(T)
    first, second = plan_fix(str(ckpt), t, others=[]), plan_fix(str(ckpt), t, others=[])
    original = (ckpt / "config.json").read_bytes()
    write_fix(str(ckpt), first)
    written = (ckpt / "config.json").read_bytes()
    with pytest.raises(FixRefused, match="changed after ckptlint read it"):
        write_fix(str(ckpt), second)
    assert (ckpt / "config.json").read_bytes() == written
    assert (ckpt / "config.json.orig").read_bytes() == original


def test_a_locked_file_is_waited_for_then_refused(ckpt, monkeypatch):
    monkeypatch.setattr(fixmod, "LOCK_WAIT_S", 0.3)
    (t,) = resolve(T)
    fp = plan_fix(str(ckpt), t, others=[])
    fd = os.open(ckpt / "config.json", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as another ckptlint fix --write holds it
        with pytest.raises(FixRefused, match="another ckptlint fix"):
            write_fix(str(ckpt), fp)
    finally:
        os.close(fd)
    assert not (ckpt / "config.json.orig").exists() and temps(ckpt) == []


RACER = textwrap.dedent("""
    import json, os, sys, time
    from ckptlint.fix import FixRefused, plan_fix, write_fix
    from ckptlint.targets import resolve
    path, target, ready, go = sys.argv[1:5]
    (t,) = resolve(target)
    fp = plan_fix(path, t, others=[])  # every racer plans from the original ...
    open(ready, "w").close()
    while not os.path.exists(go):  # ... and all write at once
        time.sleep(0.005)
    try:
        notes = write_fix(path, fp)
        print(json.dumps({"wrote": fp.added, "notes": notes}))
    except FixRefused as exc:
        print(json.dumps({"refused": str(exc)}))
""")


def test_concurrent_runs_lose_nothing(ckpt, tmp_path):
    # Two targets whose fixes differ (sglang==0.5.15: model.eh_proj and model.decoder.mlp.experts;
    # vllm==0.24.0: model.layers.78.mlp.experts), two racers each, all planned from the same original.
    original = (ckpt / "config.json").read_bytes()
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": SRC}
    racers = []
    for i, target in enumerate(["sglang==0.5.15", "vllm==0.24.0"] * 2):
        ready = tmp_path / f"ready{i}"
        racers.append((ready, subprocess.Popen([sys.executable, "-c", RACER, str(ckpt), target, str(ready), str(go)],
                                               env=env, stdout=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 120
    while not all(r.exists() for r, _ in racers):
        assert time.monotonic() < deadline and all(p.poll() is None for _, p in racers)
        time.sleep(0.02)
    go.touch()
    results = [json.loads(p.communicate(timeout=120)[0]) for _, p in racers]
    final = json.loads((ckpt / "config.json").read_text())["quantization_config"]["exclude"]
    wrote = [r for r in results if "wrote" in r]
    for r in wrote:  # no edit that was reported written is lost
        assert set(r["wrote"]) <= set(final), (r, final)
    for r in results:
        assert "wrote" in r or "changed after ckptlint read it" in r["refused"] or "another ckptlint" in r["refused"]
    assert len(wrote) == 1, results  # the others saw the file change under them and wrote nothing
    assert wrote[0]["notes"] == ["original saved as config.json.orig"]
    assert (ckpt / "config.json.orig").read_bytes() == original and temps(ckpt) == []


# --- the textual editor, on generated documents and layouts ----------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ckptlint import jsonedit  # noqa: E402

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(st.text(max_size=6), _JSON, max_size=4),
       section=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "skip"), _JSON, max_size=4),
       current=st.sampled_from(["absent", "null", "empty", "some"]),
       kind=st.sampled_from(["array", "object"]),
       layout=st.sampled_from([(None, (", ", ": ")), (None, (",", ":")), (2, None), (4, None), ("\t", None)]),
       crlf=st.booleans(), ascii_=st.booleans(),
       new=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True))
def test_extend_only_inserts_and_gives_the_intended_document(doc, section, current, kind, layout, crlf, ascii_, new):
    import copy

    section = dict(section)
    existing: object = {"array": ["x"], "object": {"-:x": {}}}[kind] if current == "some" else \
        {"array": [], "object": {}}[kind] if current == "empty" else None
    if current != "absent":
        section["skip"] = existing
    doc = {**doc, "quantization_config": section}
    indent, seps = layout
    text = json.dumps(doc, indent=indent, separators=seps, ensure_ascii=ascii_)
    if crlf:
        text = text.replace("\n", "\r\n")
    expected = copy.deepcopy(doc)
    if kind == "array":
        items = [json.dumps(e, ensure_ascii=False) for e in new]
        expected["quantization_config"]["skip"] = list(existing or []) + new
    else:
        items = [("-:" + e, "{}") for e in new if "-:" + e != "-:x"]
        expected["quantization_config"]["skip"] = {**(existing or {}), **{k: {} for k, _ in items}}
    out = jsonedit.extend(text, ["quantization_config"], "skip", items, kind)
    jsonedit.check(out, expected)
    if current in ("some", "absent") or (current == "empty" and indent is None):
        only_inserts(text, out)  # nothing of the original text changes
    if not crlf:
        assert "\r" not in out
    elif indent is not None:
        assert "\r\n" in out and "\n" not in out.replace("\r\n", "")


@pytest.mark.parametrize("text, before, want", [
    ('{"q": {"d": {"a": 1, "b": 2}}}', "b", '{"q": {"d": {"a": 1, "c": {}, "b": 2}}}'),
    ('{"q": {"d": {"a": 1, "b": 2}}}', "a", '{"q": {"d": {"c": {}, "a": 1, "b": 2}}}'),
    ('{"q": {"d": {"a":1}}}', "a", '{"q": {"d": {"c":{},"a":1}}}'),
    ('{"q": {"d": {\n  "a": 1\n}}}', "a", '{"q": {"d": {\n  "c": {},\n  "a": 1\n}}}'),
    ('{"q": {"d": {"a": 1}}}', "zz", '{"q": {"d": {"a": 1,"c": {}}}}'),  # no such key: appended
])
def test_jsonedit_inserts_before_a_key(text, before, want):
    from ckptlint import jsonedit

    assert jsonedit.extend(text, ["q"], "d", [("c", "{}")], "object", before=before) == want
