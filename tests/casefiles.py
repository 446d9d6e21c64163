"""Rule cases as data files: discovery, checkpoint building, running and comparing (tests/cases/README.md).

A case is ``tests/cases/<CODE>/<name>.toml``; a case that expects the rule to fire has its golden
output next to it, ``<name>.golden.json``. ``build_case`` writes the checkpoint the case describes
(sparse files), ``run_case`` checks it with ``ckptlint check --select CODE --format json --isolated
--no-verdict pass`` (the exit code says what the rule found; a release with no verdict, which fails a
plain check, is tested in tests/test_gate.py) and returns the normalised result, ``check_facts`` tests the case's hand-written facts against it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptlint.testing import models
from ckptlint.testing.builder import DELETE, MINIMAL_CONFIG, parse_listing, write_checkpoint, write_safetensors

CASES_DIR = Path(__file__).parent / "cases"
CODE_RE = re.compile(r"[A-Z]{2}[0-9]{3}")
UPDATE_ENV = "CKPTLINT_UPDATE_GOLDENS"
PLACEHOLDER = "<checkpoint>"

CASE_KEYS = {"why", "expect", "targets", "flags", "check", "checkpoint", "post", "must", "must_not"}
CHECKPOINT_KEYS = {"recipe", "config", "config_text", "hf_quant_config", "tensors", "tensor_edits", "shards",
                   "index", "total_size", "metadata", "shard_options"}
RECIPE_KEYS = {
    "glm5_quark_mxfp4": {"dims", "mtp_exclude", "with_mtp"},
    "modelopt_nvfp4": {"dims", "mtp_quantized", "with_mtp", "config_json"},
    "qwen_mtp_spec": {"arch", "method", "mtp_quantized", "with_mtp", "exclude_mtp"},
    "gpt_oss_spec": {"layers", "hidden", "intermediate", "experts", "experts_fmt", "attn_fmt",
                     "modules_to_not_convert"},
    "layout": {"modules", "dims", "with_mtp", "store", "store_mtp", "quantization_config", "hf_quant_config",
               "config_extra"},
    "upstream": {"case"},
}
DIMS_FAMILIES = {"glm5": models.MoeDims, "deepseek": models.deepseek_dims, "dense": models.DenseDims,
                 "mixtral": models.mixtral_dims, "qwen3_moe": models.qwen3_moe_dims,
                "minimax_m2": models.minimax_m2_dims, "gemma3": models.gemma3_dims, "mistral": models.mistral_dims,
                "phi3": models.phi3_dims, "nemotron": models.nemotron_dims, "gemma2": models.gemma2_dims,
                 "phimoe": models.phimoe_dims}
CONFIG_PRESETS = {"quark_mxfp4_config": models.quark_mxfp4_config, "ct_config": models.ct_config,
                  "gptq_config": models.gptq_config, "awq_config": models.awq_config}
MATCH_KEYS = {"code", "target", "module", "consequence", "severity", "file", "error_text", "name"}
TEXT_FIELDS = ("message", "hint", "error_text", "module")
TEXT_OPS = ("contains", "startswith", "endswith")


class CaseError(ValueError):
    """A case file that does not follow the format (tests/cases/README.md)."""


@dataclass
class Case:
    code: str
    name: str
    path: Path
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.code}/{self.name}"

    @property
    def golden(self) -> Path:
        return self.path.with_name(self.name + ".golden.json")

    @property
    def fires(self) -> bool:
        return self.data["expect"] == "fires"


def discover(root: Path = CASES_DIR) -> list[Case]:
    out = []
    for p in sorted(root.glob("*/*.toml")):
        with open(p, "rb") as f:
            data = tomllib.load(f)
        out.append(Case(p.parent.name, p.stem, p, data))
    return out


def validate(case: Case) -> None:
    d = case.data
    _keys(d, CASE_KEYS, case.id)
    if not isinstance(d.get("why"), str) or len(d["why"].split()) < 5:
        raise CaseError(f"{case.id}: `why` must say, in words, which behaviour the case encodes")
    if d.get("expect") not in ("fires", "clean"):
        raise CaseError(f"{case.id}: `expect` must be \"fires\" or \"clean\"")
    if not d.get("targets") or not all(isinstance(t, str) for t in d["targets"]):
        raise CaseError(f"{case.id}: `targets` must list at least one target")
    ck = d.get("checkpoint")
    if ck is not None:
        _keys(ck, CHECKPOINT_KEYS, case.id + " [checkpoint]")
        if "recipe" in ck:
            r = ck["recipe"]
            if r.get("name") not in RECIPE_KEYS:
                raise CaseError(f"{case.id}: unknown recipe {r.get('name')!r} (known: {sorted(RECIPE_KEYS)})")
            _keys(r, RECIPE_KEYS[r["name"]] | {"name"}, case.id + " [checkpoint.recipe]")
            if "tensors" in ck or "config" in ck or "config_text" in ck:
                raise CaseError(f"{case.id}: a recipe and explicit config/tensors exclude each other")
    for m in d.get("must", []) + d.get("must_not", []):
        allowed = MATCH_KEYS | {"count", "data", "tensors_contains", "tensors_all_startwith"} \
            | {f"{f}_{op}" for f in TEXT_FIELDS for op in TEXT_OPS}
        _keys(m, allowed, case.id + " [[must]]")
    if case.fires and not d.get("must"):
        raise CaseError(f"{case.id}: a case that fires states at least one fact in [[must]]")


def _keys(d: dict, allowed: set[str], where: str) -> None:
    extra = set(d) - allowed
    if extra:
        raise CaseError(f"{where}: unknown key(s) {sorted(extra)}")


# --- building ---------------------------------------------------------------------------------
def _bytes(v: Any) -> bytes:
    """A bytes value: a string (UTF-8), {hex = "..."}, {text = "...", repeat = N}, or a list of these."""
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, list):
        return b"".join(_bytes(x) for x in v)
    if isinstance(v, dict) and set(v) == {"hex"}:
        return bytes.fromhex(v["hex"])
    if isinstance(v, dict) and set(v) <= {"text", "repeat"}:
        return v["text"].encode("utf-8") * int(v.get("repeat", 1))
    raise CaseError(f"not a bytes value: {v!r}")


def _undelete(v: Any) -> Any:
    if v == "<DELETE>":
        return DELETE
    if isinstance(v, dict):
        return {k: _undelete(x) for k, x in v.items()}
    return v


def _shard_opts(opts: dict[str, Any]) -> dict[str, Any]:
    out = dict(opts)
    for k in ("raw_header", "append_bytes"):
        if k in out:
            out[k] = _bytes(out[k])
    if "entry_override" in out:
        out["entry_override"] = {n: _undelete(e) for n, e in out["entry_override"].items()}
    if isinstance(out.get("duplicate_key"), list):
        out["duplicate_key"] = tuple(out["duplicate_key"])
    if "extra_pairs" in out:
        out["extra_pairs"] = [tuple(p) for p in out["extra_pairs"]]
    return out


def _dims(spec: dict[str, Any] | None, default: str) -> Any:
    spec = dict(spec or {})
    family = spec.pop("family", default)
    return DIMS_FAMILIES[family](**spec)


def _config_value(v: Any, modules: list | None = None, layout: Any = None) -> Any:
    if not isinstance(v, dict) or "preset" not in v:
        return v
    kw = {k: x for k, x in v.items() if k != "preset"}
    if kw.get("exclude") == "<unquantized>":  # Quark: every linear the layout keeps unquantized
        kw["exclude"] = models.unquantized_linear_names(modules, layout)
    return CONFIG_PRESETS[v["preset"]](**kw)


def _layout_recipe(r: dict[str, Any]) -> models.Spec:
    dense = r.get("modules", "moe") == "dense"
    d = _dims(r.get("dims"), "dense" if dense else "glm5")
    mods = models.dense_modules(d) if dense else models.moe_modules(d, with_mtp=r.get("with_mtp", True))
    first_mtp = None if dense else d.num_hidden_layers
    store, store_mtp = r.get("store", {}), r.get("store_mtp", r.get("store", {}))

    def pick(m: models.Module) -> str | None:
        table = store_mtp if first_mtp is not None and m.layer is not None and m.layer >= first_mtp else store
        return table.get(m.category)

    layout = models.Layout(pick)
    cfg = d.config()
    cfg.update(r.get("config_extra", {}))  # further config.json keys (e.g. mlp_only_layers)
    if "quantization_config" in r:
        cfg["quantization_config"] = _config_value(r["quantization_config"], mods, layout)
    hq = _config_value(r.get("hf_quant_config"), mods, layout)
    return models.Spec(cfg, layout.tensors(mods), hf_quant_config=hq)


def _recipe(r: dict[str, Any]) -> models.Spec:
    name = r["name"]
    kw = {k: v for k, v in r.items() if k != "name"}
    if name == "layout":
        return _layout_recipe(kw)
    if name == "upstream":
        from ckptlint.testing.upstream import CASES

        (c,) = [c for c in CASES if c.name == kw["case"]]
        return c.make()
    if "dims" in kw:
        kw["dims"] = _dims(kw["dims"], "glm5" if name == "glm5_quark_mxfp4" else "deepseek")
    return getattr(models, name)(**kw)


def _edit_tensors(tensors: list, edits: dict[str, Any]) -> list:
    _keys(edits, {"drop", "rename", "set", "add"}, "[checkpoint.tensor_edits]")
    out = list(tensors)
    for pat in edits.get("drop", []):
        rx = re.compile(pat)
        kept = [t for t in out if not rx.fullmatch(t[0])]
        if len(kept) == len(out):
            raise CaseError(f"tensor_edits.drop {pat!r} matches no tensor")
        out = kept
    for pat, repl in edits.get("rename", []):
        renamed = [(re.sub(pat, repl, n), dt, s) for n, dt, s in out]
        if renamed == out:
            raise CaseError(f"tensor_edits.rename {pat!r} renames no tensor")
        out = renamed
    if "set" in edits:
        new = {n: (n, dt, s) for n, dt, s in parse_listing(edits["set"])}
        missing = set(new) - {t[0] for t in out}
        if missing:
            raise CaseError(f"tensor_edits.set names tensors the checkpoint does not have: {sorted(missing)}")
        out = [new.get(t[0], t) for t in out]
    if "add" in edits:
        out += parse_listing(edits["add"])
    return out


def build_case(case: Case, root: Path) -> Path:
    """Write the case's checkpoint under ``root`` and return the path to check."""
    root.mkdir(parents=True, exist_ok=True)
    ck = case.data.get("checkpoint")
    if ck is not None:
        if "recipe" in ck:
            spec = _recipe(ck["recipe"])
            config, tensors, hq = spec.config, spec.tensors, spec.hf_quant_config
        else:
            config = ck["config_text"] if "config_text" in ck else ck.get("config", MINIMAL_CONFIG)
            tensors = parse_listing(ck.get("tensors", ""))
            hq = None
        if "hf_quant_config" in ck:
            hq = ck["hf_quant_config"]
        if config is False:  # `config = false`: no config.json
            config = None
        if "tensor_edits" in ck:
            tensors = _edit_tensors(tensors, ck["tensor_edits"])
        write_checkpoint(root, config=config, tensors=tensors, shards=ck.get("shards", 2),
                         hf_quant_config=hq, index=ck.get("index", "auto"), sparse=True,
                         metadata=ck.get("metadata", {"format": "pt"}), total_size=ck.get("total_size"),
                         shard_options={f: _shard_opts(o) for f, o in ck.get("shard_options", {}).items()})
    for step in case.data.get("post", []):
        _post(root, step)
    return root / case.data.get("check", ".")


def _json_path(path: Any) -> list[str]:
    return path.split(".") if isinstance(path, str) else list(path)


def _post(root: Path, step: dict[str, Any]) -> None:
    """One file operation after the checkpoint is written (README: `[[post]]`)."""
    op, name = step.get("op"), step.get("file")
    if not name or os.path.isabs(name) or ".." in Path(name).parts:
        raise CaseError(f"[[post]] needs a relative `file` inside the checkpoint: {step!r}")
    p = root / name
    if "value_json" in step:  # values TOML cannot write (null, integers over 64 bits)
        step = {**step, "value": json.loads(step["value_json"])}
    if op in ("set", "delete", "append", "remove"):
        doc = json.loads(p.read_text(encoding="utf-8"))
        *parents, last = _json_path(step["path"])
        obj = doc
        for k in parents:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        if op == "set":
            obj[last] = step["value"]
        elif op == "delete":
            del obj[last]
        elif op == "append":
            obj[last].append(step["value"])
        else:
            obj[last].remove(step["value"])
        p.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    elif op == "write":
        if "value" in step:
            p.write_text(json.dumps(step["value"], indent=2) + "\n", encoding="utf-8")
        else:
            p.write_bytes(_bytes(step["data"]))
    elif op == "unlink":
        p.unlink()
    elif op == "mkdir":
        p.mkdir()
    elif op == "symlink":
        os.symlink(step["to"], p)
    elif op == "safetensors":
        opts = {k: v for k, v in step.items() if k not in ("op", "file", "tensors")}
        opts.setdefault("metadata", {"format": "pt"})
        write_safetensors(p, parse_listing(step.get("tensors", "")), **_shard_opts(opts))
    else:
        raise CaseError(f"[[post]] unknown op {op!r}")


# --- running ----------------------------------------------------------------------------------
def run_case(case: Case, path: Path, root: Path) -> dict[str, Any]:
    """``ckptlint check`` in-process with only the case's rule selected; the normalised result."""
    from ckptlint import cli

    args = ["check", str(path), "--select", case.code, "--format", "json", "--isolated", "--quiet",
            "--no-verdict", "pass"]
    for t in case.data["targets"]:
        args += ["--target", t]
    args += case.data.get("flags", [])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    try:
        report = json.loads(out.getvalue())
    except json.JSONDecodeError:
        raise AssertionError(f"{case.id}: no JSON report (exit {code}): {err.getvalue().strip()}") from None
    return normalise({"exit_code": code, "findings": report["findings"]}, root, case.data["targets"])


NEWEST = "<newest>"


def normalise(value: Any, root: Path, targets: list[str] = ()) -> Any:
    """Replace the temporary checkpoint directory with ``<checkpoint>`` wherever it appears; for a
    framework whose requested targets are all newer than its newest verified release, that release
    (``vllm==0.33.0``) becomes ``vllm==<newest>``, so the golden holds when a release is added."""
    from ckptlint.targets import known_versions, parse_version

    text = json.dumps(value, ensure_ascii=False)
    for r in {str(root), os.path.realpath(root)}:
        text = text.replace(json.dumps(r)[1:-1], PLACEHOLDER)
    for fw in {t.split("==")[0] for t in targets if "==" in t}:
        versions = [t.split("==", 1)[1] for t in targets if t.startswith(fw + "==")]
        known = known_versions(fw)
        if known and all(parse_version(v) > parse_version(known[-1]) for v in versions):
            text = text.replace(f"{fw}=={known[-1]}", f"{fw}=={NEWEST}")
    return json.loads(text)


def dump_golden(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False) + "\n"


# --- facts ------------------------------------------------------------------------------------
def _matches(f: dict[str, Any], m: dict[str, Any]) -> bool:
    for k, v in m.items():
        if k == "count":
            continue
        if k in MATCH_KEYS:
            if f.get(k) != v:
                return False
        elif k == "data":
            if not all((f.get("data") or {}).get(dk) == dv for dk, dv in v.items()):
                return False
        elif k == "tensors_contains":
            if v not in (f.get("tensors") or []):
                return False
        elif k == "tensors_all_startwith":
            if not f.get("tensors") or not all(t.startswith(v) for t in f["tensors"]):
                return False
        else:
            field, op = k.rsplit("_", 1)
            text = f.get(field) or ""
            for frag in (v if isinstance(v, list) else [v]):
                ok = frag in text if op == "contains" else getattr(text, op)(frag)
                if not ok:
                    return False
    return True


def check_facts(case: Case, result: dict[str, Any]) -> None:
    findings = result["findings"]
    assert all(f["code"] == case.code for f in findings), [f["code"] for f in findings]
    if case.fires:
        assert findings, f"{case.id}: expected {case.code} to fire, got no finding"
    else:
        assert findings == [] and result["exit_code"] == 0, f"{case.id}: expected clean, got {findings}"
    for m in case.data.get("must", []):
        hits = [f for f in findings if _matches(f, m)]
        assert hits, f"{case.id}: no finding matches {m}; got {[_brief(f) for f in findings]}"
        if "count" in m:
            assert len(hits) == m["count"], f"{case.id}: {len(hits)} findings match {m}, expected {m['count']}"
    for m in case.data.get("must_not", []):
        hits = [f for f in findings if _matches(f, m)]
        assert not hits, f"{case.id}: findings match must_not {m}: {[_brief(f) for f in hits]}"


def _brief(f: dict[str, Any]) -> tuple:
    return (f["target"], f["module"], f["consequence"], f.get("error_text"))
