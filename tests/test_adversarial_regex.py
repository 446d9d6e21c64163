"""Config-supplied regular expressions are bounded (issue 18, item 3) and keep Python's semantics.

ReDoS in a skip list, a compressed-tensors target, a GPTQ `dynamic` key or a ModelOpt glob ends
within a time budget as finding CF312 (failing and passing synthetic checkpoints below); every pattern
that finishes gives exactly Python's `re` answer (differential property test).
"""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlint import userregex
from ckptlint.matching import compile_list
from ckptlint.testing.models import (DenseDims, all_linears, ct_config, dense_spec, gptq_config)
from bounded import run_cli
from helpers import build, run

EVIL = r"([a-z_.0-9]+)*X"  # exponential on any name of the charset without an X
NAME = "model.layers.0.self_attn.q_proj"


@pytest.fixture
def scope():
    """The config regexes of one check (a fresh time budget): passed explicitly, never a global."""
    return userregex.RegexScope()


# --- the static bound ---------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", [
    r".*lm_head", r".*mlp\.gate$", r"model\.layers\.\d+\.self_attn.*", r".*self_attn.*", r"lm_head",
    r"model.layers.(0|1|2)\..*", r"^model\.layers\.(?:[0-9]|1[0-5])\..*", r"(?!.*mtp).*", r".*\.(q|k|v)_proj$",
    r"model\.layers\.[0-9]+\.mlp\.experts\.\d+\.(gate|up|down)_proj", r"(?:ab)*c", r"x{3}.*", r"(?=.*a).*b",
])
def test_real_world_patterns_are_linear(pattern):
    assert userregex.is_linear(pattern)


@pytest.mark.parametrize("pattern", [
    EVIL, r"(a|aa)+b", r"(\w+\.)*experts", r"(?:.*\.)?mlp\.experts", r".*\.layers\.\d+\.mlp",
    r".*a.*a.*X", r"(a*)*b", r"(x+x+)+y", r"(a)\1", r"(?:ab|cd){20}", r"(?=.*a.*a)b", r".*\d+\.",
])
def test_patterns_that_can_backtrack_are_guarded(pattern):
    assert not userregex.is_linear(pattern)


def test_fullmatch_counts_the_trailing_repeat():
    assert userregex.is_linear(r"model\..*") and not userregex.is_linear(r"model\..*\..*", full=True)


# --- the deadline ---------------------------------------------------------------------------------

def test_catastrophic_pattern_is_undecided_within_its_budget(scope):
    rx = scope.compile(EVIL)
    t0 = time.monotonic()
    assert not rx.match(NAME)
    first = time.monotonic() - t0
    assert 0.9 < first < userregex.PATTERN_BUDGET_S + 0.5
    assert rx.reason.startswith("did not finish within 1.0 s") and rx.undecided_names == [NAME]
    t0 = time.monotonic()
    for i in range(1000):  # once undecided, never run again
        assert not rx.match(f"model.layers.{i}.mlp.down_proj")
    assert time.monotonic() - t0 < 0.1 and rx.undecided_count == 1001 and len(rx.undecided_names) == 5


def test_all_patterns_share_a_total_budget(scope):
    t0 = time.monotonic()
    got = [bool(scope.compile(f"([a-z_.0-9]+)*X{i}").match(NAME)) for i in range(8)]
    assert got == [False] * 8
    assert time.monotonic() - t0 < userregex.TOTAL_BUDGET_S + 1.0
    reasons = [scope.lookup(f"([a-z_.0-9]+)*X{i}").reason for i in range(8)]
    assert reasons[0].startswith("did not finish") and reasons[-1].startswith("out of time")


def test_guarded_pattern_that_finishes_gives_pythons_answer(scope):
    rx = scope.compile(r"(\w+\.)*experts")
    assert not rx.linear
    assert rx.match("model.layers.0.mlp.experts") and not rx.match("model.layers.0.mlp.gate")
    assert rx.reason is None and rx.undecided_count == 0


def test_no_timer_off_the_main_thread_means_not_run(scope):
    out = {}

    def work():
        out["evil"] = bool(scope.compile(EVIL).match(NAME))
        out["linear"] = bool(scope.compile(r".*q_proj").match(NAME))

    t0 = time.monotonic()
    th = threading.Thread(target=work)
    th.start()
    th.join(10)
    assert time.monotonic() - t0 < 1.0
    assert out == {"evil": False, "linear": True}
    assert scope.lookup(EVIL).reason.startswith("no timer here")


def test_a_program_that_uses_sigalrm_keeps_it(scope):
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGALRM, mine)
    try:
        assert not scope.compile(EVIL).match(NAME)
        assert signal.getsignal(signal.SIGALRM) is mine
        assert scope.lookup(EVIL).reason.startswith("no timer here")
    finally:
        signal.signal(signal.SIGALRM, old)


def test_skip_list_modes_use_the_bounded_matcher(scope):
    t0 = time.monotonic()
    lst = compile_list("exact_or_regex", ["lm_head", "re:" + EVIL, "re:.*q_proj"], scope)
    assert lst.first_match(NAME) == "re:.*q_proj"  # the evil entry is undecided, then the next one matches
    glob = compile_list("glob_component", ["model.layers.*(a|aa)+b"], scope)  # ModelOpt: metacharacters pass through
    assert glob.first_match("model.layers.0." + "a" * 40) is None
    assert time.monotonic() - t0 < userregex.TOTAL_BUDGET_S + 1.0
    assert scope.lookup(EVIL).undecided_count == 1


# --- semantics: whatever finishes is Python's answer --------------------------------------------

_SINGLE = ["a", "b", ".", r"\.", r"\d", "[ab]", "[^a]", "1"]
_ATOMS = st.sampled_from([*_SINGLE, "(a|b)", "(?:ab|a)", "(a)"])


def _pattern() -> st.SearchStrategy[str]:
    def quantify(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.tuples(inner, st.sampled_from(["", "*", "+", "?", "{2}", "{1,3}", "*?", "+?", "*+"])).map(
            lambda t: t[0] + t[1] if t[0] in _SINGLE else f"(?:{t[0]}){t[1]}")

    node = st.recursive(_ATOMS, lambda inner: st.one_of(
        quantify(inner), st.lists(inner, min_size=2, max_size=4).map("".join),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})")), max_leaves=8)
    return st.tuples(node, st.sampled_from(["", "$"])).map("".join)


@settings(max_examples=400, deadline=None)
@given(_pattern(), st.lists(st.text(alphabet="ab.1", max_size=12), min_size=1, max_size=5), st.booleans())
def test_bounded_match_equals_re(pattern, names, full):
    rx = userregex.RegexScope().compile(pattern, full)
    py = re.compile(pattern)
    for n in names:
        try:
            want = (py.fullmatch(n) if full else py.match(n)) is not None
        except SystemError:  # CPython's engine fails on some possessive repeats: ckptlint must not
            assert not rx.match(n) and rx.reason and "re module fails" in rx.reason, (pattern, n)
            return
        assert bool(rx.match(n)) is want, (pattern, n, rx.linear)


def test_regex_engine_failure_is_undecided_not_a_crash():
    """CPython 3.11's re raises SystemError for a possessive repeat around a capture group on some
    names; a skip-list entry like that is undecided (CF312), never an internal error."""
    pattern, name = "(?:(?:(a|b)|.))*+", "a11"
    try:
        re.compile(pattern).match(name)
    except SystemError:
        pass
    else:  # a Python whose engine does not fail: nothing to guard
        pytest.skip("this Python's re matches the pattern")
    rx = userregex.RegexScope().compile(pattern)
    assert not rx.linear
    assert rx.match(name) is False and rx.undecided_names == [name]
    assert "SystemError" in rx.reason


def test_invalid_patterns_match_nothing_as_before(scope):
    assert scope.compile("(") is None
    assert compile_list("exact_or_regex", ["re:("]).invalid() == ["re:("]


# --- CF312 on synthetic checkpoints (failing and passing) ----------------------------------------

def test_cf312_ct_ignore_redos(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config(ignore=["lm_head", "re:" + EVIL]))
    t0 = time.monotonic()
    rep = run(build(tmp_path, spec), "vllm==0.33.0", "sglang==0.5.23")
    assert time.monotonic() - t0 < userregex.TOTAL_BUDGET_S + 10
    got = {f.target: f for f in rep.findings if f.code == "CF312"}
    assert set(got) == {"vllm==0.33.0", "sglang==0.5.23"}
    f = got["vllm==0.33.0"]
    assert f.consequence.value == "load-error" and f.file == "config.json"
    assert f.message.startswith(f"`ignore` entry `{EVIL}`: Python's re did not decide whether it matches")
    assert "expect start-up to stall" in f.message and f.data["pattern"] == EVIL


def test_cf312_passes_with_the_linear_rewrite(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config(ignore=["lm_head", "re:.*X"]))
    rep = run(build(tmp_path, spec), "vllm==0.33.0", "sglang==0.5.23")
    assert not [f for f in rep.findings if f.code == "CF312"]
    assert not [f for f in rep.findings if f.severity.value == "error"]


def test_cf312_ct_target_and_gptq_dynamic_rule(tmp_path):
    ct = dense_spec(DenseDims(), all_linears("ct_w4a16"), ct_config(targets=["re:" + EVIL, "Linear"]))
    rep = run(build(tmp_path, ct, name="ct"), "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "CF312"]
    assert f.message.startswith("config_groups target")
    gq = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(dynamic={"+:" + EVIL: {"bits": 8}}))
    rep = run(build(tmp_path, gq, name="gptq"), "vllm==0.33.0")
    (f,) = [f for f in rep.findings if f.code == "CF312"]
    assert f.message.startswith("`dynamic` rule")


@pytest.mark.parametrize("entry", ["re:" + EVIL, r"re:(.*)*X", r"re:([^X]|.)*X", r"re:(\w+\.?)+\d\d\d\d\d\dZ"])
def test_redos_corpus_on_the_command_line(tmp_path, entry):
    spec = dense_spec(DenseDims(num_hidden_layers=4), all_linears("ct_w4a16"), ct_config(ignore=["lm_head", entry]))
    path = build(tmp_path, spec)
    r = run_cli(["check", str(path), "-t", "vllm==0.33.0", "-t", "sglang==0.5.23", "-f", "json"], cwd=tmp_path)
    r.assert_clean(codes=(1,), budget_s=userregex.TOTAL_BUDGET_S + 12, mem_mib=250)
    assert '"code": "CF312"' in r.out


def test_cf312_modelopt_glob_with_regex_metacharacters(tmp_path):
    # ModelOpt turns `.` into `\.` and `*` into `.*`; other metacharacters pass through, so this glob
    # is the regex ([a-z_\.0-9]+)+X, fullmatched against every module name.
    from ckptlint.testing.models import MoeDims, modelopt_nvfp4

    spec = modelopt_nvfp4(MoeDims(num_hidden_layers=3), with_mtp=False)
    spec.hf_quant_config["quantization"]["exclude_modules"].append("([a-z_.0-9]+)+X")
    rep = run(build(tmp_path, spec), "sglang==0.5.23")
    (f,) = [f for f in rep.findings if f.code == "CF312"]
    assert f.message.startswith(r"`exclude_modules` glob (as a regex) `([a-z_\.0-9]+)+X`")
    assert f.file == "hf_quant_config.json" and f.consequence.value == "load-error"
