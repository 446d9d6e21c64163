"""Grouping across releases reads where a finding names its release (``findings.Text``), not its words.

The text report shows one entry for a finding that says the same on several releases. A finding's text
names its own release through :func:`ckptlint.findings.mention`; grouping leaves that place out and
puts back the name (one release) or "this release" (several). A release id written as plain text (a
quoted framework message, the name of another release) is text like any other word.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import re

import pytest

from casefiles import build_case, discover
from ckptlint.findings import MAX_TEXT, Consequence, Finding, Text, clip, mention
from ckptlint.render.grouping import group_findings, said


def _f(target: str | None, message: str, **kw) -> Finding:
    return Finding(code="TG601", consequence=Consequence.LOAD_ERROR, target=target, message=message, **kw)


def _texts(groups) -> list[tuple[list[str], str]]:
    return [(g.targets, g.text(g.message)) for g in groups]


def test_a_text_reads_as_its_string_everywhere():
    t = "config.json: " + mention("sglang==0.5.15") + " refuses it; " + mention("vllm==0.11.0") + " too"
    plain = "config.json: sglang==0.5.15 refuses it; vllm==0.11.0 too"
    assert isinstance(t, Text) and t == plain and str(t) == plain and type(str(t)) is str
    assert t.names == ("sglang==0.5.15", "vllm==0.11.0") and t.parts == ("config.json: ", " refuses it; ", " too")
    assert json.dumps({"m": t}) == json.dumps({"m": plain}) and hash(t) == hash(plain)
    back = pickle.loads(pickle.dumps(t))
    assert back == t and back.names == t.names and back.parts == t.parts
    with pytest.raises(AttributeError):
        t.names = ()  # type: ignore[misc]
    # a name put into an f-string or through a str method is plain text from then on
    assert type(f"{t}") is str and type(t.strip()) is str


def test_a_clipped_text_keeps_the_names_it_keeps_whole():
    long = mention("sglang==0.5.15") + " " + "x" * 3000 + mention("vllm==0.11.0")
    c = clip(long)
    assert c == clip(str(long)) and len(c) <= MAX_TEXT
    assert isinstance(c, Text) and c.names == ("sglang==0.5.15",)
    assert _f("sglang==0.5.15", long).message == c


def test_the_same_finding_on_several_releases_is_one_entry_saying_this_release():
    gs = group_findings([_f(t, mention(t) + " has no model class for X", hint="pick another than " + mention(t),
                            assumptions=["fusion at the default for " + mention(t)])
                         for t in ("sglang==0.5.5", "sglang==0.5.9", "vllm==0.11.0")])
    (g,) = gs
    assert g.targets == ["sglang==0.5.5", "sglang==0.5.9", "vllm==0.11.0"]
    assert g.text(g.message) == "this release has no model class for X"
    assert g.text(g.hint) == "pick another than this release"
    assert [g.text(a) for a in g.assumptions] == ["fusion at the default for this release"]


def test_a_single_release_is_named():
    (g,) = group_findings([_f("vllm==0.24.0", mention("vllm==0.24.0") + " has no model class for Y")])
    assert g.targets == ["vllm==0.24.0"] and g.text(g.message) == "vllm==0.24.0 has no model class for Y"


def test_a_release_id_in_plain_text_is_text():
    """The id of one of the releases, written as plain text (here: what the framework prints, and a
    sentence about a release), neither makes the findings differ nor becomes "this release"."""
    quoted = "ValueError: sglang==0.5.5 cannot load GlmMoeDsaForCausalLM"
    gs = group_findings([_f(t, mention(t) + " has no model class; fixed since sglang==0.5.5", error_text=quoted)
                         for t in ("sglang==0.5.5", "vllm==0.11.0")])
    (g,) = gs
    assert g.targets == ["sglang==0.5.5", "vllm==0.11.0"]
    assert g.text(g.message) == "this release has no model class; fixed since sglang==0.5.5"
    assert g.text(g.error_text) == quoted
    # the same words, only as plain text: two findings that differ, each shown as written
    plain = group_findings([_f(t, f"{t} has no model class") for t in ("sglang==0.5.5", "vllm==0.11.0")])
    assert _texts(plain) == [(["sglang==0.5.5"], "sglang==0.5.5 has no model class"),
                             (["vllm==0.11.0"], "vllm==0.11.0 has no model class")]


def test_a_release_checked_with_another_releases_data_names_that_one():
    """``sglang==0.5.10`` and ``sglang==0.5.11`` are checked with sglang==0.5.9's data: their findings
    name 0.5.9, which is not their own release; they say the same and stay apart from 0.5.9's own."""
    gs = group_findings([_f(t, mention("sglang==0.5.9") + " refuses X")
                         for t in ("sglang==0.5.9", "sglang==0.5.10", "sglang==0.5.11")])
    assert _texts(gs) == [(["sglang==0.5.9"], "sglang==0.5.9 refuses X"),
                          (["sglang==0.5.10", "sglang==0.5.11"], "sglang==0.5.9 refuses X")]


def test_said_leaves_out_only_the_findings_own_release():
    t = mention("sglang==0.5.15") + " and " + mention("sglang==0.5.1") + "."
    assert said(t, "sglang==0.5.1").pieces == ("sglang==0.5.15 and ", ".")
    assert said(t, "sglang==0.5.15").pieces == ("", " and sglang==0.5.1.")
    assert said(t, None).pieces == (str(t),) and said(str(t), "sglang==0.5.1").pieces == (str(t),)
    assert said(None, "sglang==0.5.1") is None and not said("", "x")


def _naming_cases():
    """One case per rule whose golden findings name their own release in their text."""
    out: dict[str, object] = {}
    for case in discover():
        if case.code in out or not case.fires or not case.golden.exists():
            continue
        doc = json.loads(case.golden.read_text(encoding="utf-8"))
        for f in doc["findings"]:
            words = [f.get("message"), f.get("hint"), f.get("error_text"), *f.get("assumptions", [])]
            if f.get("target") and any(w and f["target"] in w for w in words):
                out[case.code] = case
                break
    return list(out.values())


NAMING = _naming_cases()


@pytest.mark.parametrize("case", NAMING, ids=[c.id for c in NAMING])
def test_rules_name_their_release_through_mention(case, tmp_path, monkeypatch):
    """Wherever a finding's text names the finding's own release, that place is a :func:`mention`,
    so that the text report can show the finding once for several releases."""
    from ckptlint import cli

    made: list[Finding] = []
    post = Finding.__post_init__

    def record(self):
        post(self)
        made.append(self)

    monkeypatch.setattr(Finding, "__post_init__", record)
    path = build_case(case, tmp_path / "ckpt")
    args = ["check", str(path), "--select", case.code, "-f", "json", "--isolated", "-q", "--no-verdict", "pass"]
    for t in case.data["targets"]:
        args += ["--target", t]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(args + case.data.get("flags", []))
        except SystemExit:
            pass
    gaps = 0
    for f in made:
        if f.target is None:
            continue
        word = re.compile(r"(?<![\w.=])" + re.escape(f.target) + r"(?![\w.])")
        for value in (f.message, f.hint, f.error_text, f.brief, f.family, *f.assumptions):
            s = said(value, f.target)
            if s is None:
                continue
            gaps += len(s.pieces) - 1
            assert not any(word.search(p) for p in s.pieces), (f.code, f.target, str(value))
    assert gaps, f"{case.id}: no finding named its release through mention()"
