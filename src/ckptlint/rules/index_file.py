"""The index and the set of files (IX201-IX212).

The index file itself (its JSON, ``weight_map``, the shard names it gives, ``metadata``, repeated
keys: detected by :mod:`ckptlint.reader.index`) and the index against the shard files there are
(shards missing or not named, tensors in the wrong shard, in two, or not listed, no weights at all:
:mod:`ckptlint.reader.fileset`). The reader builds their findings with these classes. IX204 is
reported per target: :meth:`IndexMissingShard.check` gives the reader's finding the outcome of the
target's release (target data ``loading.missing_shard``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ckptlint.findings import Consequence, Finding, mention
from ckptlint.rules.base import ReaderRule, RuleContext

# File names a framework's error text quotes at most (it lists every missing shard).
MAX_FILES_QUOTED = 10


class IndexInvalidJson(ReaderRule):
    """`model.safetensors.index.json` is not a JSON object.

    ## What it does
    Reports an index that cannot be read, is not UTF-8 or valid JSON, or is not a JSON
    object. An index that is not a regular file (a FIFO, a device) or is larger than 256 MiB
    (about 2.5 million tensors) is not read at all and reported the same way.

    ## Why is this bad?
    Frameworks parse the index to find the shards and fail. ckptlint then checks every
    `.safetensors` file in the directory instead.

    ## Example
    An index truncated in the middle of `weight_map`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX201"
    name = "index-invalid-json"
    consequences = (Consequence.LOAD_ERROR,)


class IndexInvalidWeightMap(ReaderRule):
    """The index has no usable `weight_map`.

    ## What it does
    Reports an index without `weight_map`, with a `weight_map` that is not an object, or
    with values that are not strings.

    ## Why is this bad?
    Frameworks take the shard list from `weight_map` and fail when it is missing or
    malformed.

    ## Example
    `"weight_map": ["model-00001-of-00002.safetensors"]`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX202"
    name = "index-invalid-weight-map"
    consequences = (Consequence.LOAD_ERROR,)


class IndexInvalidShardName(ReaderRule):
    """The index names a shard that is not a plain `.safetensors` file name.

    ## What it does
    Reports `weight_map` values that are empty, `.`/`..`, contain a slash or backslash, are absolute
    paths, or do not end in `.safetensors`. Such a path is never opened or even stat'ed.

    ## Why is this bad?
    Shards must live in the checkpoint directory; a path outside it is at best a broken
    download and at worst makes a loader read files it should not. The tensors mapped to it
    are not loaded.

    ## Example
    `"lm_head.weight": "../secret.safetensors"`.

    ## How to fix
    Map every tensor to a shard file in the checkpoint directory.
    """

    code = "IX203"
    name = "index-invalid-shard-name"
    consequences = (Consequence.LOAD_ERROR,)


class IndexMissingShard(ReaderRule):
    """The index names a shard file that does not exist.

    ## What it does
    Reports shard names in `weight_map` that are not in the checkpoint directory, with the
    tensors mapped to them.

    ## Why is this bad?
    Loaders look for every listed shard and fail (or miss those weights).

    ## Example
    `weight_map` mentions `model-00003-of-00003.safetensors`, but only two shards were
    downloaded.

    ## How to fix
    Download the missing shard, or regenerate the index.
    """

    code = "IX204"
    name = "index-missing-shard"
    consequences = (Consequence.LOAD_ERROR, Consequence.SILENT_CORRUPTION)
    # What happens depends on the release (target data `loading.missing_shard`): SGLang <= 0.5.16
    # and vLLM load the shards that are present and leave the rest uninitialised; SGLang >= 0.5.17
    # refuses to start. So this reader finding is reported once per target.
    scope = "target"

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        issues = [i for i in ctx.checkpoint.issues if i.code == self.code]
        if not issues:
            return
        if ctx.target is None:
            yield from super().check(ctx)
            return
        outcome = ctx.target.data.loading.missing_shard
        files = [s for i in issues for s in i.data.get("shards", [i.data.get("shard")])]
        n = sum(i.data.get("shard_count", 1) for i in issues)
        text = (outcome.error or "").format(index_file=ctx.checkpoint.index_file or issues[0].file,
                                             n=n, dir=ctx.checkpoint.root, files=_shown(files, n),
                                             file_set=_shown(files, n, "{}")) or None
        consequence = Consequence(outcome.consequence)
        for i in issues:
            message = (i.message + "; " + mention(ctx.target.resolved) + f": {outcome.note}" if outcome.note
                       else i.message)
            yield replace(i, target=ctx.target.id, consequence=consequence, severity=consequence.default_severity,
                          error_text=text, data=dict(i.data), message=message)


class IndexTensorNotInShard(ReaderRule):
    """The index maps tensors to a shard whose header does not contain them.

    ## What it does
    Compares `weight_map` with the shard headers and reports tensors the index places in a
    shard that lacks them. If the tensor is in another listed shard it is hygiene
    (frameworks read every listed file); if no listed shard has it, the weight is simply not
    there.

    ## Why is this bad?
    A missing weight is left uninitialised by several loaders (silently, for quantized
    layers), so the model produces garbage.

    ## Example
    The index says `model.layers.61.eh_proj.weight` is in shard 2, and no shard has it.

    ## How to fix
    Re-export the checkpoint, or add the shard that holds those tensors.
    """

    code = "IX205"
    name = "index-tensor-not-in-shard"
    consequences = (Consequence.HYGIENE, Consequence.SILENT_CORRUPTION)


class TensorInMultipleShards(ReaderRule):
    """The same tensor is stored in more than one shard.

    ## What it does
    Reports tensor names present in two or more shards that are read.

    ## Why is this bad?
    Frameworks load every file, so the tensor is loaded twice and the last copy wins; when
    the copies differ in dtype or shape, which one is used depends on file order.

    ## Example
    `lm_head.weight` in both `model-00001-of-00002.safetensors` and
    `model-00002-of-00002.safetensors`.

    ## How to fix
    Keep each tensor in exactly one shard.
    """

    code = "IX206"
    name = "tensor-in-multiple-shards"
    consequences = (Consequence.HYGIENE, Consequence.SILENT_CORRUPTION)


class TensorNotInIndex(ReaderRule):
    """Shards contain tensors the index does not list.

    ## What it does
    Reports tensors found in a listed shard's header but absent from `weight_map`.

    ## Why is this bad?
    Frameworks read whole shard files, so they still load; but tools that trust the index
    (parameter counts, partial loaders) miss them.

    ## Example
    MTP weights appended to the last shard without updating the index.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX207"
    name = "tensor-not-in-index"
    consequences = (Consequence.HYGIENE,)


class IndexTotalSizeMismatch(ReaderRule):
    """The index's `metadata.total_size` is not the sum of tensor bytes.

    ## What it does
    Compares `metadata.total_size` with the sum of tensor byte sizes in the listed shards
    and says whether it equals the sum of file sizes instead.

    ## Why is this bad?
    Readers do not check it, but it should be the tensor byte total (as huggingface_hub
    writes it); a different value hints at an index written for other files.

    ## Example
    `total_size` counts the shard files' headers too, as some export scripts compute it.

    ## How to fix
    Set `metadata.total_size` to the sum of tensor byte sizes.
    """

    code = "IX208"
    name = "index-total-size-mismatch"
    consequences = (Consequence.HYGIENE,)


class UnreferencedShard(ReaderRule):
    """A `.safetensors` file in the directory is not referenced by the index.

    ## What it does
    Reports `.safetensors` files beside an index that does not name them, with the tensors
    they hold. Their tensors are not part of the checkpoint's tensor set.

    ## Why is this bad?
    Frameworks read only the shards the index names, so these tensors are never loaded: dead
    weight at best, and missing weights (e.g. an MTP layer) if they were meant to load.

    ## Example
    `model_mtp.safetensors` added next to the shards, but `weight_map` never updated.

    ## How to fix
    Add its tensors to the index if they are needed, or delete the file.
    """

    code = "IX209"
    name = "unreferenced-shard"
    consequences = (Consequence.HYGIENE,)


class NoSafetensorsWeights(ReaderRule):
    """The checkpoint directory has no `.safetensors` weights.

    ## What it does
    Reports a checkpoint directory (with `config.json`) that contains no `.safetensors`
    files. If weights in other formats (`.bin`, `.pt`, `.gguf`, ...) are there it is
    hygiene: they were not checked.

    ## Why is this bad?
    Without weight files there is nothing to load; with only non-safetensors weights,
    ckptlint cannot check anything.

    ## Example
    A repository cloned with only its JSON files.

    ## How to fix
    Download the weights, or convert them to safetensors.
    """

    code = "IX210"
    name = "no-safetensors-weights"
    consequences = (Consequence.LOAD_ERROR, Consequence.HYGIENE)


class IndexInvalidMetadata(ReaderRule):
    """The index's `metadata` or `metadata.total_size` has the wrong type.

    ## What it does
    Reports an index whose `metadata` is not an object, or whose `total_size` is not a
    non-negative integer.

    ## Why is this bad?
    Serving frameworks ignore it, but other tools read it and may fail.

    ## Example
    `"metadata": {"total_size": "16GB"}`.

    ## How to fix
    Write `total_size` as the integer sum of tensor bytes.
    """

    code = "IX211"
    name = "index-invalid-metadata"
    consequences = (Consequence.HYGIENE,)


class IndexDuplicateKey(ReaderRule):
    """The index repeats a key.

    ## What it does
    Reports keys that appear more than once in the same object of the index (usually a
    tensor twice in `weight_map`).

    ## Why is this bad?
    JSON parsers keep the last value silently; if the two entries name different shards, one
    mapping is lost.

    ## Example
    `"lm_head.weight"` listed twice in `weight_map`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = "IX212"
    name = "index-duplicate-key"
    consequences = (Consequence.HYGIENE,)


def _shown(files: list[str], n: int, brackets: str = "[]") -> str:
    """``files`` as a framework's error text prints them (a Python list, or a set with ``"{}"``),
    the first few of ``n``."""
    text = ", ".join(map(repr, files[:MAX_FILES_QUOTED]))
    if n > MAX_FILES_QUOTED or len(files) != n:
        text += f", ... ({n:,} in all)"
    return brackets[0] + text + brackets[1]
