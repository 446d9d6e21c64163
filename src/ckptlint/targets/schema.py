"""Schema of the versioned target data files (strict: our own data fails loudly).

One TOML file per verified framework release under ``targets/data/<framework>/<version>.toml``.
A file may ``extends`` its predecessor; tables merge recursively, lists and scalars replace.
Every file cites the upstream files (and PRs) it transcribes in ``[[sources]]``.

The vocabulary is deliberately small; each value is interpreted by ckptlint.simulate and
ckptlint.matching:

* match modes (how an ignore/exclude entry is compared with a runtime module prefix):
  ``exact``, ``exact_or_regex`` (``re:`` → ``re.match``, else equality), ``substring``,
  ``substring_ci``, ``substring_proper`` (a substring other than the whole name, also of the name
  without ``language_model.``), ``regex_or_substring_ci`` (``re:`` → ``re.match`` only, else a case-insensitive
  substring), ``suffix`` (exact or dotted suffix), ``dotted_path`` (module-path boundary
  match), ``dotted_path_strip`` (the same after dropping trailing dots from entry and name), ``glob_component`` (``*`` → ``.*`` fullmatch of the whole prefix or of any dotted
  component), ``glob_full`` (an entry holding ``*`` or ``.`` as that glob, fullmatch of the whole
  prefix; other entries never), ``glob_whole`` (every entry as that glob, fullmatch of the whole prefix
  only), ``fnmatch``, ``gptq_dynamic`` (GPTQModel ``dynamic`` keys in the order written:
  ``-:<regex>`` excludes, ``+:<regex>`` / ``<regex>`` keeps the module quantized; each re.match'ed, the
  first rule that matches decides).
* name mappers (``Architecture.rename`` / ``skiplist_rename`` / ``quant_rename``, ``Draft.rename`` /
  ``skiplist_rename``): lists of :class:`NameRule` of kinds ``regex``, ``prefix``, ``suffix``,
  ``substring``; the first rule that matches applies; ckptlint.simulate.renames compiles them and
  composes them per architecture and release (``Plan.renames``).
* module kinds: ``linear``, ``moe``, ``plain`` (a framework-native nn.Linear that no quant
  method touches), ``unquantized_linear`` (a Linear layer class the model builds without its quant
  config, so never quantized whatever the method), ``lm_head``, ``embedding``, ``router``, ``other``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MatchMode = Literal[
    "exact", "exact_or_regex", "substring", "substring_ci", "regex_or_substring_ci", "suffix", "dotted_path",
    "glob_component", "fnmatch", "substring_or_fnmatch", "gptq_dynamic", "substring_proper", "glob_full", "dotted_path_strip",
    "glob_whole",
]
ModuleKind = Literal["linear", "moe", "plain", "unquantized_linear", "lm_head", "embedding", "router", "other"]
ConsequenceName = Literal["load-error", "silent-corruption", "degraded", "hygiene"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(Strict):
    file: str  # path inside the released package (wheel)
    what: str  # what was read there, in our words
    refs: list[str] = Field(default_factory=list)  # upstream PRs / issues


class Outcome(Strict):
    consequence: ConsequenceName
    error: str | None = None  # the text the framework prints, with {placeholders}
    note: str | None = None


class KvDecl(Strict):
    """Values a quant config declares: every key of ``match`` (a dotted path into the quant config as the
    framework reads it: hf_quant_config.json's `quantization` object, or config.json's
    `quantization_config`) is set (not null, not an empty string or object: the frameworks test its truth)
    and, unless its list is empty, equal to one of the values listed (strings compared case-insensitively)."""

    match: dict[str, list[Any]]


class KvCacheRules(Strict):
    """What a quant method does for the attention layers' KV cache (the quant config's answer for an
    Attention / RadixAttention layer, and the server's ``--kv-cache-dtype auto``)."""

    # the quant config gives attention layers a KV-cache method, which registers `k_scale`/`v_scale`
    # parameters (initialised to -1.0) ...
    scale_params: bool = False
    # ... only when one of these is declared (empty: always)
    scale_params_when: list[KvDecl] = Field(default_factory=list)
    # `--kv-cache-dtype auto` (the default) runs the KV cache in FP8 when one of these is declared
    fp8_when: list[KvDecl] = Field(default_factory=list)
    # stored scale forms (Loading.kv.forms names) the quant config itself maps onto the attention's
    # parameters, for loaders that ask it first (KvScales.hook)
    hook_forms: list[str] = Field(default_factory=list)


class KvPath(Strict):
    """What a model's loader does with one stored form of KV-cache scale: it looks the tensor up under
    ``to`` (a template on the form's groups: {pre}, the module path before the attention's own
    component, and {kv}, `k` or `v`). It loads when that is the attention's scale parameter
    (``KvLoading.param``) and the parameter exists; otherwise ``absent`` happens: the loader drops the
    tensor (silently, or with ``warns``: a warning) or fails with ``error`` ({name}: the name looked
    up; {inner}: it without its leading `model.`, as an inner model's loader names it)."""

    to: str = ""
    simulated: bool = True  # False: ckptlint has not read what the loader does with this form
    absent: Literal["dropped", "load-error"] = "dropped"
    warns: bool = False
    error: str | None = None
    note: str | None = None


class KvScales(Strict):
    """A model loader's handling of stored KV-cache scales, by stored form (KvLoading.forms). A form
    it has no path for is not simulated. With ``hook``, the loader first asks the quant config to
    map the name (vLLM `get_cache_scale`, the method's ``KvCacheRules.hook_forms``): a form the
    method maps takes that path instead."""

    # False: an architecture that inherits these entries (``like``) but whose loader ckptlint has not read
    simulated: bool = True
    forms: dict[str, KvPath] = Field(default_factory=dict)
    hook: KvPath | None = None
    # the loader's scale-name remap (the release's maybe_remap_kv_scale_name) relative to its stacked-params
    # rename (q/k/v_proj -> qkv_proj): "remap-first"; "stacked-then-remap" (the renamed name is remapped);
    # "remap-unstacked" (only names the stacked mapping leaves alone are remapped); "none" (no remap); "mapper"
    # (the quant config's cache-scale mapper renames the stream before the model's loader, vLLM 0.26+). The
    # conformance suite runs the release's remap function in this order and compares with ``forms``.
    order: Literal["remap-first", "stacked-then-remap", "remap-unstacked", "none", "mapper"] | None = None
    note: str | None = None  # how the loader does it, in our words (shown with the findings)


class KvPostLoad(Strict):
    """The KV-cache method's check after loading (``when``: on every attention layer that has the
    scale parameters, or only when the KV cache is quantized): one of the two scales loaded."""

    when: Literal["always", "fp8_cache"]
    only_k: Outcome
    only_v: Outcome


class KvLoading(Strict):
    """KV-cache scales as the checkpoint stores them: ``forms``, name -> regex fullmatch'ed against a
    tensor name with groups ``pre`` and ``kv``; ``param``: the attention's scale parameter, a
    template on the same groups."""

    forms: dict[str, str]
    suffixes: list[str]  # every form's tensor names end with one of these (a cheap filter before the regexes)
    param: str
    post_load: KvPostLoad | None = None


class ConfigRefusal(Strict):
    """The framework refuses the quant config at start-up when every key of ``all`` has that value
    and no key of ``none`` does (a list value: any of them; absent keys take ``defaults``); with
    ``dynamic`` also for each GPTQModel `dynamic` `+:` override (merged over the base config), with
    ``error_dynamic``. A key may be a dotted path into nested objects, ``*`` standing for every
    child (``config_groups.*.weights.actorder``): it has a value if any child's does. Errors may
    name top-level config keys as {key} and the `dynamic` key as {pattern}."""

    all: dict[str, Any] = Field(default_factory=dict)
    none: dict[str, Any] = Field(default_factory=dict)
    missing: list[str] = Field(default_factory=list)  # ... and each of these keys is absent
    present: list[str] = Field(default_factory=list)  # ... and each of these keys is set (not null)
    defaults: dict[str, Any] = Field(default_factory=dict)
    error: str
    dynamic: bool = False
    error_dynamic: str | None = None  # {pattern}: the `dynamic` key


class MoeFallback(Strict):
    """A FusedMoE the method's Marlin MoE kernel cannot take is built by ``method`` instead, quantized
    and before the skip list is consulted: on ``platforms``; with a group size outside
    ``group_sizes``; a hidden size not a multiple of ``hidden_multiple``; an intermediate size per TP
    partition not a multiple of max(``inter_multiple_min``, group) -- or, with tile padding, of the
    group alone; and, when ``marlin_bits_sym`` is set, for (bits, sym) outside it (the plain method
    then serves every layer)."""

    method: str = "MoeWNA16"
    platforms: list[str] = Field(default_factory=lambda: ["rocm"])
    group_sizes: list[int] = Field(default_factory=lambda: [-1, 32, 64, 128])
    hidden_multiple: int = 128
    inter_multiple_min: int = 64
    tile_padding: Literal["never", "without_actorder", "always"] = "never"
    marlin_bits_sym: list[list[Any]] = Field(default_factory=list)


class MoeSchemeRefusal(Strict):
    """Building a FusedMoE quantized with one of ``schemes`` (ckptlint.quant.schemes names; with
    ``static_input`` set, only when the input scales are static / dynamic) raises on ``platforms``."""

    schemes: list[str]
    static_input: bool | None = None
    platforms: list[Literal["cuda", "rocm"]] = Field(default_factory=lambda: ["cuda", "rocm"])
    error: str


class LayerSkipped(Strict):
    """A shared skip test a quant config runs on every non-MoE layer before its own (SGLang
    layers/quantization/utils.py, vLLM quantization/utils/quant_utils.py ``is_layer_skipped``): a fused
    layer (with ``fused_name_first``: not itself matched under ``match``) whose last component is in the
    model class's packed mapping (else ``fallback_fused``) is tested through its shards under
    ``match``, which must agree (else the method's ``mixed_shards`` error); any other layer by its own
    name under ``match``, and then: a layer whose name contains a key of ``all_listed`` is also skipped
    when every listed replacement of that key is literally an entry; otherwise, a layer whose name
    contains ``experts_word`` is skipped by an entry containing that word that contains the layer's
    name (``experts`` = "replace": instead of the ``match`` result; "or": as well). With ``or_main`` the
    layer is skipped if this test or the method's own test of the layer's runtime name (no shard
    expansion: the fused name as it is) says so; without it this test alone decides."""

    match: MatchMode
    fused_name_first: bool = False  # a fused layer's own name matching skips it before its shards are tested
    class_mapping: bool = True  # False: the method never passes the model's packed mapping (only fallback_fused)
    fallback_fused: dict[str, list[str]] = Field(default_factory=dict)
    all_listed: dict[str, list[str]] = Field(default_factory=dict)
    experts_word: str = "experts"
    experts: Literal["replace", "or"] = "replace"
    or_main: bool = True


class MethodRules(Strict):
    """How one quant method decides, per runtime module, whether it is built quantized."""

    supported: bool = True
    simulated: bool = True  # False: supported by the framework, but ckptlint does not simulate it
    note: str | None = None  # why unsupported / not simulated
    error: str | None = None  # supported = false: the error the release prints at start-up
    # the method as written in one of these files fails at start-up: file -> the error printed
    rejected_in: dict[str, str] = Field(default_factory=dict)
    refusals: list[ConfigRefusal] = Field(default_factory=list)
    # Config keys holding the skip list, tried in order (first present wins).
    exclude_keys: list[str] = Field(default_factory=list)
    # modelopt: which keys to read when the config comes from hf_quant_config.json.
    exclude_keys_hf_quant_config: list[str] = Field(default_factory=list)
    match: MatchMode = "exact"
    # Fused modules: test the fused runtime name itself before its shards (True: under ``match``;
    # "literal": only an entry equal to the fused name, as written -- `name not in ignore`).
    direct_fused_match: bool | Literal["literal"] = False
    # A shared skip test run before the method's own on non-MoE layers (SGLang is_layer_skipped).
    layer_skipped: LayerSkipped | None = None
    # Fused-name tail rule of ModelOpt (an entry whose last component is one of these
    # excludes every module whose last component contains it, whatever its layer).
    fused_tail_names: list[str] = Field(default_factory=list)
    # Non-zero: the fused-name tail rule asserts that the module prefix and the entry both have this many
    # dotted components; tried per entry in written order after that entry's own match, a mismatch stops
    # start-up with ``fused_tail_error`` (0: no such check)
    fused_tail_parts: int = 0
    fused_tail_error: str | None = None
    # FusedMoE: "prefix" (only an entry matching `…experts` itself), "children" (also any
    # entry that starts with `…experts.`), "reversed_substring" (prefix is a substring of an
    # entry containing "experts"), "expert0" (expert 0's projections decide; the FusedMoE's own
    # name is never tested), "never".
    moe: Literal["prefix", "children", "reversed_substring", "expert0", "never"] = "prefix"
    # Fused-module names added to the model class's packed_modules_mapping for this method.
    packed_extra: dict[str, list[str]] = Field(default_factory=dict)
    # The method never receives the model's packed mapping: fused names are matched as they are.
    no_packed_mapping: bool = False
    # False: the method keeps a new dict when the model class's declared mapping (plus ``packed_extra``)
    # is empty (`mapping or {}`, before the model is built) and the model never hands it its instance
    # mapping, so entries the class adds while it is constructed (``packed_modules_mapping_if``) are not
    # seen: a fused module such a class adds is tested by its own name.
    construction_fill: bool = True
    # False: the skip list is tested on a fused module's runtime name only, never on its shards (the
    # packed mapping still serves the list of quantized modules, ``include_key``).
    fused_shards: bool = True
    # Module kinds whose per-module `dynamic` `+:` overrides (GPTQModel) the method applies; other
    # kinds are built with the base config.
    dynamic_overrides: list[ModuleKind] = Field(default_factory=lambda: ["linear", "moe", "lm_head"])
    # Module kinds this method builds quantized when not excluded.
    quantizes: list[ModuleKind] = Field(default_factory=lambda: ["linear", "moe"])
    # Is the model class's checkpoint->runtime name mapper applied to the skip list?
    apply_mapper: bool = True
    # Also keep a copy of each entry with a leading ``model.`` added/removed.
    model_prefix_variants: bool = False
    mixed_shards: Outcome | None = None  # construction error when fused shards disagree
    moe_mixed: Outcome | None = None  # construction error when expert 0's projections disagree
    missing_scale: Outcome | None = None  # a registered scale the checkpoint lacks (default: silent)
    # moe = "expert0": the projections of expert 0 it probes, and whether it probes them under the
    # model's own expert names instead
    expert0_projections: list[str] = Field(default_factory=lambda: ["gate_proj", "up_proj", "down_proj"])
    expert0_model_names: bool = False
    # moe = "reversed_substring": only entries containing this word are tried
    moe_entry_word: str = "experts"
    # vLLM AWQ: an empty skip list is inferred from the safetensors dtypes (all-float modules).
    infer_skip_from_dtypes: bool = False
    # A list of the quantized modules instead: config key (entries are substrings of the layer
    # prefix; nested lists flattened; a fused layer's shards must agree), and whether an empty or
    # absent list is inferred from the tensor dtypes (modules holding a tensor that is not
    # F16/BF16/F32). Applies to the module kinds listed.
    include_key: str | None = None
    infer_include_from_dtypes: bool = False
    include_float_dtypes: list[str] = Field(default_factory=lambda: ["F16", "BF16", "F32"])  # (for the inference)
    include_kinds: list[ModuleKind] = Field(default_factory=lambda: ["linear", "lm_head"])
    # the model's name mapper rewrites the include list (given or inferred) like a skip list
    include_apply_mapper: bool = False
    # Block FP8 MoE: a TP partition of the intermediate size that is not a multiple of the block is
    # loaded with the block refined to gcd(block_n, block_k, partition, hidden) when that is at least
    # this (vLLM 0.30+ refine_fp8_moe_block_shape); None: the block check raises.
    moe_block_refine_min: int | None = None
    moe_fallback: MoeFallback | None = None  # FusedMoE layers Marlin cannot take (vLLM GPTQ -> MoeWNA16)
    moe_scheme_refusals: list[MoeSchemeRefusal] = Field(default_factory=list)
    kv_cache: KvCacheRules | None = None  # the attention layers' KV cache under this method


class Stacked(Strict):
    fused: str
    shards: list[str]
    requires_config: str | None = None  # only when this config.json key is set (non-null)


class PackedIf(Strict):
    """Entries a model class adds to its ``packed_modules_mapping`` while it is constructed, when
    config.json's ``key`` is set and not empty (not absent, null, false, 0, "", [] or {}): the
    framework tests the attribute's truth, e.g. ``getattr(config, key, [])``."""

    key: str
    mapping: dict[str, list[str]]


class KindRule(Strict):
    pattern: str  # regex, searched in the runtime module name
    kind: ModuleKind
    loader: str | None = None  # runtime class name (for quoting its error text)
    methods: list[str] | None = None  # rule applies only for these quant methods


class ShapeKinds(Strict):
    """The kind of a module that no ``kinds`` pattern names, from what the checkpoint stores for it:
    quantized tensors (packed weight or scales) -> ``linear``; no weight tensor, or a float weight
    whose rank is not one of ``linear_ranks`` (norms, biases, 3-D/4-D/5-D convolutions) -> ``other``;
    a 2-D float weight of [vocab, hidden] (config keys) outside the decoder layers (``layer_prefix``)
    -> ``lm_head`` if its name matches ``lm_head``, else ``embedding``; any other 2-D float weight ->
    ``linear``. The frameworks decide quantization
    per module class (LinearBase / ParallelLMHead / VocabParallelEmbedding / FusedMoE), and only
    Linear-like classes hold a 2-D [out, in] weight."""

    linear_ranks: list[int] = Field(default_factory=lambda: [2])
    vocab_key: str = "vocab_size"
    hidden_key: str = "hidden_size"
    lm_head: str = r"(^|\.)(lm_head|embed_out|output_layer|output)$"


class NameRule(Strict):
    """One rule of a name mapper (the model class's ``WeightsMapper``, a draft class's own renaming, the
    quant-config prefix a sub-layer is built with). ``kind`` says how ``pattern`` finds its place in a
    name: ``regex`` (``re.search``; ``to`` is an ``re.sub`` replacement), ``prefix`` (the name starts
    with it), ``suffix`` (the name ends with it), ``substring`` (it occurs anywhere); for the last three
    ``pattern`` and ``to`` are literal text. ``{mtp}`` in a draft rule's pattern is the MTP layer index.
    A mapper is an ordered list of rules of which the first that matches applies (once per mapper: vLLM's
    ``WeightsMapper`` keeps the same four kinds, each a table of its own; ckptlint lists a table's rules
    in the order they are tried)."""

    kind: Literal["regex", "prefix", "suffix", "substring"] = "regex"
    pattern: str
    to: str
    count: int = 1  # occurrences replaced (0: every one, like str.replace); prefix / suffix: one


class UnexpectedNames(Strict):
    """What a model's loader does with a checkpoint tensor that has no runtime parameter, by the class
    of its name (each loader handles the three in separate branches): ``stacked``, a shard of a fused
    module (q/k/v_proj -> qkv_proj, gate/up_proj -> gate_up_proj); ``expert``, a routed expert's
    tensor (-> the FusedMoE's w13_*/w2_*); ``other``, any other name. An unset class falls back to
    ``Architecture.unexpected_param``, then ``Loading.unexpected_param``. Tensors whose name ends
    with one of ``ignored_suffixes`` are skipped silently whatever their class. Error templates may
    name {name} (the runtime parameter), {inner} (it without its leading `model.`: what a model's
    inner module calls it), {param} (its last component), {ckpt} (the checkpoint tensor), {cls} (the
    runtime module's class) and {layer} (the runtime module)."""

    stacked: Outcome | None = None
    expert: Outcome | None = None
    other: Outcome | None = None
    # a fused module's own outcome for a shard name, by the fused name (overrides `stacked`)
    fused: dict[str, Outcome] = Field(default_factory=dict)
    ignored_suffixes: list[str] = Field(default_factory=list)
    ignored_classes: list[Literal["stacked", "expert", "other"]] = Field(
        default_factory=lambda: ["stacked", "expert", "other"])  # where ignored_suffixes apply
    # outcome by tensor-name suffix, before the class (e.g. a skipped `_scale` asserted to be 1.0)
    by_suffix: dict[str, Outcome] = Field(default_factory=dict)
    # a tensor suffix the loader renames to a registered parameter when that exists (checkpoint
    # suffix -> parameter suffix), for names of ``alias_classes``
    aliases: dict[str, str] = Field(default_factory=dict)
    alias_classes: list[Literal["stacked", "expert", "other"]] = Field(default_factory=lambda: ["other"])


class AbsentModules(Strict):
    """Checkpoint modules the model class builds nothing for (e.g. a vision tower in a text-only
    class): loading their tensors does ``outcome`` (its error may name {ckpt}, the first such tensor)."""

    pattern: str  # regex searched in the checkpoint module path
    outcome: Outcome


class ExcludeCopy(Strict):
    """Copy literal skip-list entries under a checkpoint prefix to their runtime names."""

    prefix: str  # literal prefix, e.g. "model.layers.{mtp}."
    methods: list[str]
    add_if_contains: dict[str, str] = Field(default_factory=dict)  # substring -> extra entry


class WholeDraftCheck(Strict):
    """Whole draft built unquantized if this probe name is excluded (after the mapper)."""

    methods: list[str]
    probe: str  # e.g. "model.layers.{mtp}"


class Draft(Strict):
    cls: str = Field(alias="class")
    # Layer index of the MTP layer(s): "num_hidden_layers" (+i for i < count)
    count_keys: list[str] = Field(default_factory=lambda: ["num_nextn_predict_layers"])
    max_layers: int | None = None  # e.g. SGLang: only 1 NextN layer is supported
    # What loading the draft does when config.json declares more than max_layers MTP layers
    too_many_layers: Outcome | None = None
    single_layer_config_uses_layer0: bool = False  # SGLang "old design" exports
    keep_prefix: str = "model.layers.{mtp}."  # names outside it are not draft weights
    # MTP weights under a top-level prefix (Qwen3-Next / Qwen3.5 `mtp.`) instead of at layer
    # model.layers.{num_hidden_layers + i}; the main model drops them.
    prefix: str | None = None
    # ... and also any name containing this text anywhere (the main model drops those names)
    keep_substring: str | None = None
    # Draft built unquantized for a method when one of its skip-list entries matches this regex
    # (SGLang Qwen3.5 `_mtp_quant_config`: Quark with an `mtp.*` entry naming `mlp.experts`).
    quant_none_if_entry: dict[str, str] = Field(default_factory=dict)
    quant_none_entry_note: str | None = None  # why, then ({entry}: the entry that matched)
    drop: list[str] = Field(default_factory=list)  # substrings: dropped by the draft loader
    # False: the draft model has no packed_modules_mapping, so a skip list is tested against its fused
    # layers' own names only (an excluded q_proj does not exclude qkv_proj)
    packed_mapping: bool = True
    # The names the draft loader loads its checkpoint modules under (one mapper, first match wins); also the
    # runtime names of ``exclude_copy``'s copies.
    rename: list[NameRule] = Field(default_factory=list)
    kinds: list[KindRule] = Field(default_factory=list)  # tried before the model's kinds
    quant_none_for: list[str] = Field(default_factory=list)  # methods forced unquantized
    quant_none_note: str | None = None
    # The draft class's name mapper where it rewrites only the quant config's skip list (SGLang
    # DeepseekV3ForCausalLMNextN's substring rule), for methods with apply_mapper: applied to every entry's
    # text, ``re:`` and glob entries included, and to ``whole_draft_check``'s probe; first match wins.
    skiplist_rename: list[NameRule] = Field(default_factory=list)
    exclude_copy: ExcludeCopy | None = None
    whole_draft_check: WholeDraftCheck | None = None
    missing_weights: Outcome = Outcome(consequence="degraded")
    kv_scales: KvScales | None = None  # the draft loader's KV-cache scales (None: the main model's)


class RunnerOff(Strict):
    """A GPU on which the framework's default MoE runner turns shared-experts fusion off."""

    gpu_archs: list[str]  # GPU architectures (ckptlint/hardware/gpus.toml), e.g. "sm100"
    methods: list[str]  # quant method keys ("none": unquantized checkpoints)
    reason: str


class SchemeMatch(Strict):
    """A quantization scheme (ckptlint.quant.schemes names: w4a16, nvfp4, fp8_block, ...)."""

    name: str
    symmetric: bool | None = None  # None: either


class QuantGate(Strict):
    """A quant config's can_fuse_shared_expert(): it refuses fusion when a skip-list entry's text names
    a shared expert (contains ``entry_word`` and not ``entry_not``: a test of the entry's text, not a
    resolution of modules), and, with ``compare_schemes``, when the shared and routed experts are built
    with different schemes."""

    who: str  # how findings name the quant config, e.g. "Quark"
    # the skip list it reads: as the config writes it, or after the model's name mapper
    entries: Literal["written", "mapped"] = "written"
    exempt: list[str] = Field(default_factory=list)  # entries it does not count (regexes; {mtp}: each MTP layer)
    compare_schemes: bool = False
    entry_word: str = "shared_expert"
    entry_not: str = "shared_expert_gate"


class SharedExpertsFusion(Strict):
    """SGLang loads the shared expert as routed expert number `n_routed_experts` of the same FusedMoE."""

    architecture: str | None = None  # config.json architectures[0] must equal this (None: any)
    routed_key: str = "n_routed_experts"
    routed_counts: list[int] = Field(default_factory=list)  # allowed expert counts (empty: any)
    only_methods_for_count: dict[str, list[str]] = Field(default_factory=dict)
    shared_key: str = "n_shared_experts"
    shared_count: int | None = 1
    # a shared-expert count other than shared_count fails an assert instead of turning fusion off
    shared_count_assert: bool = False
    shared_count_error: str | None = None
    shared_default: int | None = None  # the shared-expert count when config.json has no shared_key
    equal_keys: list[str] = Field(default_factory=list)  # config values that must all be equal
    shared_module: str = "mlp.shared_experts"
    disable_flag: str = "--disable-shared-experts-fusion"  # the server flag that turns it off
    routed_module: str = "mlp.experts"  # the FusedMoE the shared expert is loaded into, in the same layer
    off_methods: list[str] = Field(default_factory=list)
    off_schemes: list[SchemeMatch] = Field(default_factory=list)  # the Linear layers' scheme turns it off
    platforms: list[Literal["cuda", "rocm"]] = Field(default_factory=lambda: ["cuda", "rocm"])  # where it can fuse at all
    # where it still fuses with expert parallelism (EP > 1); elsewhere EP > 1 turns it off
    ep_platforms: list[Literal["cuda", "rocm"]] = Field(default_factory=lambda: ["rocm"])
    # The quant configs whose can_fuse_shared_expert() the model consults, by method.
    quant_gates: dict[str, QuantGate] = Field(default_factory=dict)
    runner_off: list[RunnerOff] = Field(default_factory=list)


class Architecture(Strict):
    like: str | None = None  # inherit another architecture of the same target
    supported: bool = True
    # True: an entry only so that a later release can change ``supported``; the release registers the
    # class but ckptlint has no data of its own for it: simulated, and said so, as an architecture the
    # data does not name (the generic rules, ``like = "*"``)
    generic: bool = False
    layer_prefix: str = "model.layers."
    stacked: list[Stacked] = Field(default_factory=list)
    experts: str | None = None  # regex with groups (moe, expert, proj) on checkpoint modules
    expert_w13: list[str] = Field(default_factory=lambda: ["gate_proj", "up_proj"])
    expert_w2: list[str] = Field(default_factory=lambda: ["down_proj"])
    packed_modules_mapping: dict[str, list[str]] = Field(default_factory=dict)
    # ... plus these entries when a config key is set (later entries win; see PackedIf)
    packed_modules_mapping_if: list[PackedIf] = Field(default_factory=list)
    kinds: list[KindRule] = Field(default_factory=list)
    # The model class's name mapper (hf_to_*_mapper): checkpoint module paths of the main model to their
    # runtime names, first match wins; also the quant config's lists (for methods with apply_mapper /
    # include_apply_mapper; plain entries only: a mapper cannot translate `re:` or glob entries, vLLM #28072).
    rename: list[NameRule] = Field(default_factory=list)
    # The model's name mapper where it rewrites only the quant config's lists (not the module names),
    # for methods with apply_mapper, after ``rename`` (plain entries only); first match wins.
    skiplist_rename: list[NameRule] = Field(default_factory=list)
    # The quant-config prefix a sub-layer is built with where it is not its attribute path (vLLM 0.33
    # MiniMax-M2 builds `block_sparse_moe` with `prefix=f"{prefix}.mlp"`): the method's skip / quantized-module
    # lists and per-module schemes are tested against the renamed name; the parameters (and the checkpoint
    # names they load) keep the attribute path. First match wins; main-model modules only.
    quant_rename: list[NameRule] = Field(default_factory=list)
    unexpected_param: Outcome | None = None  # this model's loader, when it differs from `loading`
    unexpected: UnexpectedNames | None = None  # ... per name class (falls back to unexpected_param)
    absent: list[AbsentModules] = Field(default_factory=list)
    shape_kinds: ShapeKinds | None = None  # kinds of modules no `kinds` pattern names (None: linear if 2-D)
    error: str | None = None  # supported = false: what the release prints at start-up
    shared_experts_fusion: SharedExpertsFusion | None = None
    kv_scales: KvScales | None = None  # the loader's handling of stored KV-cache scales
    draft: Draft | None = None


class Loading(Strict):
    missing_shard: Outcome
    unexpected_param: Outcome  # a checkpoint tensor with no runtime parameter
    shape_mismatch: dict[str, str]  # loader class -> error text template
    moe_shape_mismatch: str
    kv: KvLoading | None = None  # stored KV-cache scales (None: not simulated on this target)


class TargetData(Strict):
    schema_: int = Field(alias="schema")
    framework: Literal["sglang", "vllm"]
    version: str
    extends: str | None = None
    released: str | None = None
    summary: str
    sources: list[Source]
    loading: Loading
    methods: dict[str, MethodRules]
    architectures: dict[str, Architecture]
