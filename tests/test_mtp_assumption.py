"""A checkpoint that declares MTP layers but ships none is a finding only with MTP speculative
decoding on: ckptlint's default assumption, stated in the finding and in `--help`, with the flag that
changes it."""

from __future__ import annotations

from ckptlint.testing.models import deepseek_dims, glm5_quark_mxfp4
from helpers import build, cli_run, run


def test_missing_mtp_weights_states_the_assumption_and_the_flag(tmp_path):
    path = build(tmp_path, glm5_quark_mxfp4(deepseek_dims(num_hidden_layers=30), with_mtp=False))
    rep = run(path, "vllm==0.33.0", "sglang==0.5.23")
    fs = [f for f in rep.findings if f.code == "MT701"]
    assert {f.target for f in fs} == {"vllm==0.33.0", "sglang==0.5.23"}
    for f in fs:
        assert f.message.startswith("Only with MTP speculative decoding on (ckptlint's default")
        assert "--no-speculative removes this finding" in f.message
    rep = run(path, "vllm==0.33.0", "sglang==0.5.23", speculative=False)
    assert [f for f in rep.findings if f.code.startswith("MT")] == []
    rep = run(path, "vllm==0.33.0", speculative=True)
    (f,) = [f for f in rep.findings if f.code == "MT701"]
    assert f.message.startswith("Only with MTP speculative decoding on (--speculative)")


def test_help_names_the_flag(capsys):
    code, out, _ = cli_run(capsys, "check", "--help")
    assert code == 0
    text = " ".join(out.split())
    # (the help text wraps inside `--no-speculative`)
    assert "exist only with it on" in text and "checks the serving setup without speculative decoding" in text
