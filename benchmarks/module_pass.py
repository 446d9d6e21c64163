"""A reference, not a target: the floor (read and json.loads every header) plus the least Python
work any per-module simulation has to do -- group the tensor names into modules (name minus its
last component) and test each module once against an expert rule. No validation, no target data,
no rules, no output; the expert rule has the form of the target data's (``architectures.*.experts``).

    python module_pass.py CHECKPOINT_DIR      # prints: <tensors> <modules> <expert modules>
"""
import json
import os
import re
import struct
import sys

EXPERTS = re.compile(r"^(?P<moe>.+\.(?:mlp|block_sparse_moe)\.experts)\.(?P<expert>\d+)\.(?P<proj>gate_proj|up_proj|down_proj|w1|w3|w2)$")

root = sys.argv[1]
names: list[str] = []
for name in sorted(n for n in os.listdir(root) if n.endswith(".safetensors")):
    with open(os.path.join(root, name), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    names += header
groups: dict[str, list[str]] = {}
for t in names:
    module, _, suffix = t.rpartition(".")
    g = groups.get(module)
    if g is None:
        groups[module] = [suffix]
    else:
        g.append(suffix)
match = EXPERTS.match
experts = sum(1 for m in groups if match(m) is not None)
print(len(names), len(groups), experts)
