"""KV-cache scale names: the release's own remap function, run on each stored form in the order the
target data says the model's loader runs it, against the names the data says the loader looks up.

For every target with ``loading.kv`` and every architecture whose ``kv_scales`` are simulated and give
a remap ``order`` other than "mapper", each stored form of a layer-0 K/V scale is
* renamed as the data's order says: the release's ``maybe_remap_kv_scale_name`` (extracted from the
  wheel, model_loader/weight_utils.py) before or after the architecture's stacked-params rename (its
  ``stacked`` data), or no remap at all;
* compared with the form's ``to`` (the name the loader looks the tensor up under), with the
  attention's scale parameter present;
* and, where the release's remap checks the parameter (it returns None without it), the form's
  ``absent`` must be "dropped" with ``warns``.

The remap function is pure (a name and a parameter dict in, a name or None out), so this is an exact
check of that step; what the loader does after the lookup (a guarded skip or an unguarded index) is
read, not executed, and cited in the target data.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple

MODULES = {"sglang": "sglang.srt.model_loader.weight_utils", "vllm": "vllm.model_executor.model_loader.weight_utils"}
# a stored name of each form for layer 0 (the forms' regexes in the target data must match them)
SAMPLES = {"proj": "model.layers.0.self_attn.{kv}_proj.{kv}_scale",
           "output": "model.layers.0.self_attn.{kv}_proj.output_scale",
           "attn": "model.layers.0.self_attn.{kv}_scale"}
ORDERS = ("remap-first", "stacked-then-remap", "remap-unstacked", "none")


class KvDisagreement(NamedTuple):
    target: str
    arch: str
    form: str
    name: str
    what: str

    def line(self) -> str:
        return f"{self.target} {self.arch} {self.form} {self.name}: {self.what}"


def remap_function(framework: str, version: str, download: bool = True) -> Callable[[str, dict], Any]:
    from conformance.extract import Extractor
    from conformance.wheels import source_dir

    root = source_dir(framework, version) if download else source_dir(framework, version)
    return Extractor(root, framework).get(MODULES[framework], "maybe_remap_kv_scale_name")


def _stacked(arch, name: str) -> str:
    for st in arch.stacked or ():
        for shard in st.shards:
            needle = f".{shard}."
            if needle in name:
                return name.replace(needle, f".{st.fused}.", 1)
    return name


def _expected(order: str, arch, name: str, params: dict, remap) -> str | None:
    if order == "none":
        return _stacked(arch, name)
    if order == "remap-first":
        r = remap(name, params)
        return None if r is None else _stacked(arch, r)
    s = _stacked(arch, name)
    if order == "stacked-then-remap":
        return remap(s, params)
    return s if s != name else remap(name, params)  # remap-unstacked


def disagreements(target, remap, archs: dict[str, Any] | None = None) -> Iterator[KvDisagreement]:
    """``archs``: architecture name -> resolved Architecture (default: every one the target names)."""
    import re

    kvl = target.data.loading.kv
    if kvl is None:
        return
    if archs is None:
        archs = {a: target.architecture(a) for a in target.data.architectures}
    for aname, arch in archs.items():
        ks = arch.kv_scales if arch is not None else None
        if ks is None or not ks.simulated or ks.order not in ORDERS:
            continue
        for form, path in ks.forms.items():
            if not path.simulated or form not in SAMPLES:
                continue
            for kv in ("k", "v"):
                name = SAMPLES[form].format(kv=kv)
                m = re.fullmatch(kvl.forms[form], name)
                if m is None:
                    yield KvDisagreement(target.id, aname, form, name, "the form's regex does not match its sample")
                    continue
                g = m.groupdict()
                param = kvl.param.format(pre=g.get("pre", ""), kv=g.get("kv", ""))
                want = path.to.format(pre=g.get("pre", ""), kv=g.get("kv", ""))
                got = _expected(ks.order, arch, name, {param: object()}, remap)
                if got != want:
                    yield KvDisagreement(target.id, aname, form, name,
                                         f"the release's remap in order {ks.order!r} looks it up as {got!r}, "
                                         f"the data says {want!r}")
                    continue
                if ks.order != "none" and _expected(ks.order, arch, name, {}, remap) is None \
                        and not (path.absent == "dropped" and path.warns):
                    yield KvDisagreement(target.id, aname, form, name,
                                         "without the parameter the release's remap warns and returns None "
                                         f"(dropped with a warning); the data says {path.absent!r}, "
                                         f"warns={path.warns}")
