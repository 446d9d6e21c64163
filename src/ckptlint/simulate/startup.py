"""Stage 0, start-up: can the target load this checkpoint at all, and is there data to simulate it?

A release without the architecture's model class, without the quant method, or that refuses the
quant config as written (target data ``supported``, ``refusals``, ``rejected_in``) gets a verdict
before any module is named (``Plan.unsupported``); a checkpoint ckptlint has no data for gets
"not simulated" (``Plan.not_simulated``): no verdict at all.

An architecture or a quant method that the hand-written target data does not name is looked up in
the registries extracted from the release's wheel (``ckptlint.targets.extracted``): one the release
does not register is refused at start-up with the release's own text. The hand-written data wins
where it names the architecture or method (it records refusals the registries cannot express, e.g.
a method only reachable through an override), so the registries are read only on that path.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ckptlint.deployment import default_hardware
from ckptlint.findings import mention
from ckptlint.simulate.state import State

if TYPE_CHECKING:
    from ckptlint.quant import QuantConfig
    from ckptlint.targets.schema import MethodRules


def startup_verdict(plan: State, config: dict[str, Any] | None = None) -> None:
    """Set ``plan.unsupported`` (with ``unsupported_error``) or ``plan.not_simulated`` if the load
    stops before any module is built, or if ckptlint cannot simulate it."""
    target, quant, method, arch, arch_name = plan.target, plan.quant, plan.method, plan.arch, plan.arch_name
    what = (quant.method if quant.method_key == quant.method else f"{quant.method} ({quant.method_key})") if quant else None
    if quant is not None and method is None and _unregistered_method(plan, quant, what):
        return
    if quant is not None and method is not None and not method.supported:
        plan.unsupported = mention(target.resolved) + f" does not support quantization method {what}" + (
            f": {method.note}" if method.note else "")
        plan.unsupported_error = method.error
        return
    refused = _refusal(quant, method) if quant is not None and method is not None else None
    if refused is not None:
        plan.unsupported, plan.unsupported_error = (
            mention(target.resolved)
            + f" refuses this {what} config at start-up, before any weight is loaded: {refused[0]}",
            refused[1])
        return
    if quant is not None and method is not None and quant.source_file in method.rejected_in:
        plan.unsupported_error = method.rejected_in[quant.source_file]
        plan.unsupported = (mention(target.resolved)
                            + f" refuses quantization method {what} as {quant.source_file} declares it, "
                            "at start-up, before any weight is loaded" + (f" ({method.note})" if method.note else ""))
        return
    if arch_name is not None and (arch is None or plan.generic) and _unregistered_arch(plan, config or {}):
        return
    if arch is not None and not arch.supported:
        k = _knowledge(target)
        archs = [a for a in (config or {}).get("architectures") or [] if isinstance(a, str)] or [arch_name]
        if k is not None and not any(k.registers(a) for a in archs) and _remote_code(plan, k, config or {}, archs):
            return  # (the hand data records the refusal without auto_map; the fallback applies the same)
        k = k if arch.error is None else None
        plan.unsupported = mention(target.resolved) + f" has no model class for architecture {arch_name}"
        plan.unsupported_error = arch.error
        if k is not None and not k.registers(arch_name):  # the release's own text, from its wheel
            plan.unsupported_error = k.unknown_arch_message(archs)
        return
    if arch_name is None:
        plan.not_simulated = "config.json names no architecture (`architectures`)"
        return
    if arch is None:
        plan.not_simulated = (f"ckptlint has no {target.framework} loading data for architecture {arch_name}; "
                              "the load was not simulated")
        return
    if quant is not None and method is not None and not method.simulated:
        plan.not_simulated = mention(target.resolved) + f" supports {what}, but ckptlint does not simulate it" + (
            f" ({method.note})" if method.note else "")
        return
    if quant is not None and method is None:
        k = _knowledge(target)
        registered = k is not None and quant.method in k.methods
        plan.not_simulated = ("ckptlint has no " + mention(target.resolved) + f" data for quantization method {what}"
                              + (" (the release registers it)" if registered else "")
                              + "; the load was not simulated")


def _knowledge(target: Any) -> Any:
    from ckptlint.targets.extracted import knowledge

    return knowledge(target.framework, target.version)


def _platform(plan: State) -> str:
    d, quant = plan.deployment, plan.quant
    if d.platform is not None:
        return d.platform
    # (the same assumption as the deployment the plan states: the scheme picks the native GPU, Quark MXFP4 -> MI355X)
    scheme = quant.default_scheme.name if quant and quant.default_scheme else None
    return default_hardware(quant.method if quant else None, scheme, None, d.gpu)[1]


def _unregistered_method(plan: State, quant: QuantConfig, what: str | None) -> bool:
    """A quant_method the hand data does not name and the release's registry refuses (unknown,
    deprecated under the default flags, or not on the platform): ``plan.unsupported``."""
    k = _knowledge(plan.target)
    if k is None:
        return False
    platform = _platform(plan)
    error = k.method_refusal(quant.method, platform)
    if error is None:
        return False
    entry = k.methods.get(quant.method)
    why = ("deprecated: refused unless the server is started with the flag the message names" if entry is not None
           and entry.deprecated else "not registered on ROCm" if entry is not None and platform == "rocm"
           else "not in its quantization-method registry")
    plan.unsupported = (mention(plan.target.resolved) + f" does not accept quantization method {what} at start-up ({why}; "
                        f"registry extracted from the {k.framework} {k.version} wheel)")
    plan.unsupported_error = error
    return True


def _unregistered_arch(plan: State, config: dict[str, Any]) -> bool:
    """No architecture config.json lists is registered by the release (both frameworks try each
    listed name, then their Transformers backend): refused at start-up with the release's own text
    (``plan.unsupported``), assuming the installed transformers library defines no class of that name
    for the Transformers-backend fallback (not known offline; said in the finding). Not when
    config.json's ``auto_map`` names a remote-code ``AutoModel`` class, which that backend may load."""
    from ckptlint.targets.extracted import registered_anywhere

    k = _knowledge(plan.target)
    if k is None:
        return False
    archs = [a for a in config.get("architectures") or [] if isinstance(a, str)] or [plan.arch_name]
    if any(k.registers(a) for a in archs):
        return False
    if _remote_code(plan, k, config, archs):
        return True
    names = ", ".join(archs)
    dropped = k.dropped(archs)
    known = next((r for r in map(registered_anywhere, archs) if r), None)
    where = dropped or (f"first registered in {_releases_text(known)}" if known
                        else "no release of either framework registers it")
    plan.unsupported = (mention(plan.target.resolved) + f" registers no model class for architecture {names} (registry "
                        f"extracted from the {k.framework} {k.version} wheel, {len(k.architectures)} architectures; "
                        f"{where}): the server refuses to start, unless the installed transformers library "
                        "defines that class for the release's Transformers-backend fallback")
    plan.unsupported_error = k.unknown_arch_message(archs)
    return True


def _remote_code(plan: State, k: Any, config: dict[str, Any], archs: list[str]) -> bool:
    """No listed architecture is registered, but config.json's ``auto_map`` names the remote-code
    model class the release's Transformers-backend fallback takes (the key is extracted from its
    wheel): the server then loads that code (with ``--trust-remote-code``) instead of refusing, and
    ckptlint has no data for a class it cannot read, so the load is not simulated
    (``plan.not_simulated``), for the hand-data refusal and the registry one alike."""
    key = k.remote_code_class(config)
    if key is None:
        return False
    plan.not_simulated = (mention(plan.target.resolved)
                          + f" registers no model class for architecture {', '.join(archs)}, but "
                          f"config.json's auto_map names {key} = {config['auto_map'][key]!r}: assumed loaded through the "
                          "release's Transformers backend from that remote code (needs --trust-remote-code), which "
                          "ckptlint cannot read; the load was not simulated")
    return True


def _releases_text(releases: list[tuple[str, str]]) -> str:
    by: dict[str, list[str]] = {}
    for fw, v in releases:
        by.setdefault(fw, []).append(v)
    return ", ".join(f"{fw} {vs[0]}" for fw, vs in by.items())  # (stable when newer releases are added)


def _refusal(quant: QuantConfig, method: MethodRules) -> tuple[str, str] | None:
    """(what, error) of the first MethodRules.refusals entry the quant config meets, or None."""
    raw = quant.raw if isinstance(quant.raw, dict) else {}

    def is_(value: Any, want: Any) -> bool:
        return value in want if isinstance(want, list) else value == want

    def values(cfg: dict[str, Any], r: Any, key: str) -> list[Any]:
        if "." not in key:
            return [cfg.get(key, r.defaults.get(key))]
        level: list[Any] = [cfg]
        for part in key.split("."):
            nxt: list[Any] = []
            for node in level:
                if isinstance(node, dict):
                    nxt += list(node.values()) if part == "*" else [node[part]] if part in node else []
            level = nxt
        return level

    def meets(cfg: dict[str, Any], r: Any) -> bool:
        def has(k: str, want: Any) -> bool:
            return any(is_(v, want) for v in values(cfg, r, k))
        return (all(has(k, v) for k, v in r.all.items()) and not any(has(k, v) for k, v in r.none.items())
                and all(cfg.get(k) is None and k not in cfg for k in r.missing)
                and all(cfg.get(k) is not None for k in r.present))

    def fill(text: str, r: Any, cfg: dict[str, Any], pattern: str | None = None) -> str:
        def one(m: re.Match[str]) -> str:
            k = m.group(1)
            if k == "pattern" and pattern is not None:
                return repr(pattern)
            return str(cfg[k]) if k in cfg else str(r.defaults[k]) if k in r.defaults else m.group(0)
        return re.sub(r"\{(\w+)\}", one, text)

    def describe(cfg: dict[str, Any], r: Any) -> str:
        out = [f"no `{k}`" for k in r.missing]
        for k in [*r.all, *r.none]:
            vs = values(cfg, r, k)
            out.append(f"{k}={vs[0] if len(vs) == 1 else vs!r}")
        return ", ".join(out)

    for r in method.refusals:
        if meets(raw, r):
            return describe(raw, r), fill(r.error, r, raw)
        dyn = raw.get("dynamic") if r.dynamic else None
        for pattern, over in (dyn.items() if isinstance(dyn, dict) else ()):
            if isinstance(pattern, str) and not pattern.startswith("-:") and isinstance(over, dict):
                merged = {**raw, **over}
                if meets(merged, r):
                    return (f"`dynamic` rule {pattern!r} sets {describe(merged, r)}",
                            fill(r.error_dynamic or r.error, r, merged, pattern))
    return None

