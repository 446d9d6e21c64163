"""Conformance harness: ckptlint's per-module decisions against the frameworks' own code.

Not part of the installed package (the wheel ships ``src/ckptlint`` only); used by
``scripts/conformance.py`` and ``tests/conformance`` (pytest marker ``conformance``, off by default).
See docs/conformance.md.

Interface (for the framework adapters, ``conformance/sglang.py`` and ``conformance/vllm.py``):

* ``wheels.source_dir(framework, version, download=True) -> Path``: the release's unpacked ``.py``
  sources (``<dir>/<framework>/...``), from ``pip download --no-deps`` into the cache
  ``$CKPTLINT_CONFORMANCE_CACHE`` (default ``~/.cache/ckptlint/conformance``; wheels in
  ``<cache>/wheels/``). ``wheels.WheelUnavailable`` when neither cached nor downloadable.
* ``extract.Extractor(root, package, values=None, follow=prefixes)``: ``.get(module, name)`` loads an
  upstream function or class by AST (no import of the package, no torch): imports are resolved to
  stand-ins (``stubs``), framework functions / ``*Config`` classes / constants under ``follow`` are
  followed into their files, other framework classes become ``stubs.stub_class(name)``.
  ``.fingerprints`` maps ``"module:Qual.name"`` to the sha256 of each executed function's normalised
  source; ``.fingerprint_source(module, qualname)`` tracks code that is never executed
  (``load_weights``). ``extract.class_literal(module, cls, attr)`` reads a literal class attribute
  (``packed_modules_mapping``). ``.errors``: statements that failed and became stubs.
* ``stubs.layer_for(kind, name)``: a stand-in layer (``LinearBase``/``QKVParallelLinear``/
  ``FusedMoE``/``ParallelLMHead`` ... subclasses, by ckptlint's module kind) for ``get_quant_method``;
  ``stubs.STANDINS``, ``stubs.PLATFORM`` (CUDA by default), ``stubs.Stub``, ``stubs.stub_class``.
* ``ckptside.side(ckpt, target) -> Side | None``: ckptlint's decision per runtime module
  (``Side.modules[name] = ModuleDecision(name, kind, role, quantized, conflict, forced, scheme,
  reason, shards)``) and the inputs it matched with (``exclude_main``, ``exclude_draft``,
  ``packed``, ``quant`` = the dict the framework's ``from_config`` receives).
  ``ckptside.targets(framework)``, ``fixture_paths()``, ``case_checkpoints(tmp)``,
  ``in_memory(config, tensors, hf_quant_config)``.
* ``core.Disagreement`` / ``core.compare(...)``: one record per module where the framework and
  ckptlint differ; ``core.Allow`` reads ``conformance/allow.toml``.
"""
