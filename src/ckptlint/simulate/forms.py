"""Checkpoint modules and their stored forms: the same for every target, so computed once per
checkpoint (memoised in ``Checkpoint.cache``) and shared by every target's simulation."""

from __future__ import annotations

from ckptlint.checkpoint import FLOAT_DTYPES, Checkpoint, TensorInfo
from ckptlint.simulate.model import QUANT_SUFFIXES, WEIGHT_SUFFIXES, Stored

_WEIGHT_RANK = {s: i for i, s in enumerate(WEIGHT_SUFFIXES)}


def stored_form(sig: tuple) -> tuple[Stored, bool]:
    """The stored form of a module whose tensors have this (suffix, dtype, shape) signature (in
    checkpoint order), and whether it has a matrix; computed once per distinct signature."""
    form = _FORMS.get(sig)
    if form is not None:
        return form
    weight: int | None = None
    rank = len(WEIGHT_SUFFIXES)
    scales: list[str] = []
    sc: tuple[int, ...] | None = None  # the weight_scale's shape
    shapes: dict[str, tuple[int, ...]] = {}  # other tensors' shapes, by suffix (GPTQ/AWQ scales, qzeros, g_idx)
    for i, (suffix, _, shape) in enumerate(sig):
        r = _WEIGHT_RANK.get(suffix)
        if r is not None and r < rank:
            weight, rank = i, r
        elif suffix in QUANT_SUFFIXES or suffix.endswith("_scales"):
            scales.append(suffix)
            shapes[suffix] = shape
            if suffix == "weight_scale":
                sc = shape
    scales.sort()
    has_matrix = bool(scales) or any(len(shape) >= 2 for _, _, shape in sig)
    if weight is None:
        stored = Stored(None, None, tuple(scales), sig=sig)
    else:
        suffix, dtype, shape = sig[weight]
        quantized = (dtype not in FLOAT_DTYPES) or bool(scales)
        n = k = None
        if suffix == "qweight":
            n, k = _qweight_nk(shape, shapes)
        elif len(shape) >= 2:
            n, k = shape[-2], shape[-1]
            if quantized and dtype in ("U8", "I8") and sc is not None:
                # FP4 packed two per byte: the weight_scale grid tells K (group 16 or 32).
                if len(sc) == len(shape) and sc[-1] > 0 and (sc[-1] * 16 == 2 * shape[-1] or sc[-1] * 32 == 2 * shape[-1]):
                    k = 2 * shape[-1]
        stored = Stored(quantized, TensorInfo(suffix, dtype, shape, ""), tuple(scales), logical_k=k, logical_n=n, sig=sig)
    form = _FORMS[sig] = (stored, has_matrix)
    return form


def _qweight_nk(shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]]) -> tuple[int | None, int | None]:
    """(out features N, in features K) of a GPTQ/AWQ ``qweight`` (docs/frameworks/formats.md), which is
    stored transposed against nn.Linear: ``scales`` is [K/group, N] in both formats; GPTQ packs along K
    (qweight [K*bits/32, N], so its last dimension equals the scales'), AWQ along N (qweight
    [K, N*bits/32]). GPTQ's K is the length of ``g_idx``, else qweight's rows times the packing factor
    that ``qzeros`` [K/group, N*bits/32] shows. Unknown (None) where the tensors do not say."""
    sc = shapes.get("scales")
    if len(shape) != 2 or sc is None or len(sc) != 2 or not sc[-1]:
        return None, None
    n = sc[-1]
    if shape[-1] == n:  # GPTQ: packed along K
        gi = shapes.get("g_idx")
        if gi is not None and len(gi) == 1:
            return n, gi[0]
        qz = shapes.get("qzeros")
        if qz is not None and len(qz) == 2 and qz[-1] and n % qz[-1] == 0:
            return n, shape[0] * (n // qz[-1])
        return n, None
    if shape[-1] and n % shape[-1] == 0:  # AWQ: packed along N
        return n, shape[0]
    return None, None


_FORMS: dict[tuple, tuple[Stored, bool]] = {}
# The same forms keyed by a flat (suffix, dtype, shape, suffix, dtype, shape) tuple for modules of one
# or two tensors (module_groups' fast path); any other signature is its own key.
_FLAT_FORMS: dict[tuple, tuple[Stored, bool]] = {}


def module_groups(ckpt: Checkpoint, prefix: str) -> list[tuple[str, list[TensorInfo], Stored, bool, int | None]]:
    """Checkpoint modules (tensor name minus its last component) with their tensors, stored form,
    whether they hold a matrix, and layer index under ``prefix``: the same for every target, so
    computed once per checkpoint (per layer prefix)."""
    key = ("groups", prefix)
    out = ckpt.cache.get(key)
    if out is not None:
        return out
    groups: dict[str, list] = {}
    get = groups.get
    for name, t in ckpt.tensors.items():
        module, _, suffix = name.rpartition(".")
        g = get(module)
        if g is None:
            groups[module] = [suffix, t]
        else:
            g += (suffix, t)
    out = []
    append = out.append
    flat_get = _FLAT_FORMS.get
    n = len(prefix)
    last_head: str | None = None
    last_layer: int | None = None
    last_pfx: str | None = None  # prefix + last_head + ".": consecutive modules mostly share it
    for module, g in groups.items():
        # (suffix, tensor) pairs, flat; one or two tensors is the common case, looked up by a flat
        # key (one tuple, not three) in a cache in front of the signature's
        if len(g) == 4:
            s0, t0, s1, t1 = g
            flat: tuple = (s0, t0[1], t0[2], s1, t1[1], t1[2])
            tensors = [t0, t1]
        elif len(g) == 2:
            s0, t0 = g
            flat = (s0, t0[1], t0[2])
            tensors = [t0]
        else:
            tensors = g[1::2]
            flat = tuple(zip(g[0::2], [t.dtype for t in tensors], [t.shape for t in tensors]))
        form = flat_get(flat)
        if form is None:
            if len(g) == 4:
                sig: tuple = ((s0, t0[1], t0[2]), (s1, t1[1], t1[2]))
            elif len(g) == 2:
                sig = ((s0, t0[1], t0[2]),)
            else:
                sig = flat
            form = _FLAT_FORMS[flat] = stored_form(sig)
        if last_pfx is not None and module.startswith(last_pfx):
            layer = last_layer
        else:
            layer = None
            if module.startswith(prefix):
                # the component after the prefix; consecutive modules are mostly of one layer
                j = module.find(".", n)
                head = module[n:j] if j >= 0 else module[n:]
                if head == last_head:
                    layer = last_layer
                elif head.isdecimal():  # (what int() reads: isdigit() also takes '²')
                    layer = last_layer = int(head)
                    last_head = head
                    last_pfx = module[:j + 1] if j >= 0 else None
        append((module, tensors, form[0], form[1], layer))
    ckpt.cache[key] = out
    return out


def unreadable_shards(ckpt: Checkpoint) -> set[str]:
    """Shard files whose tensors are unknown: listed, but the header could not be read (LFS pointers,
    broken or missing files). Rules that conclude from an absence stay quiet when there are any."""
    bad = {f.file for f in ckpt.issues
           if f.consequence.value == "load-error" and f.code[:2] in ("SF", "IX") and f.file}
    return {name for name, info in ckpt.shards.items() if info.n_tensors == 0 and name in bad} | \
        {f.data.get("shard") for f in ckpt.issues if f.code == "IX204" and f.data.get("shard")}


def present_layers(ckpt: Checkpoint, prefix: str) -> set[int]:
    """Layer indices that have at least one tensor (for the MTP completeness rule); once per checkpoint."""
    key = ("layers", prefix)
    out = ckpt.cache.get(key)
    if out is None:
        out = ckpt.cache[key] = {g[4] for g in module_groups(ckpt, prefix)}
        out.discard(None)
    return out

