"""The floor: read each shard's 8-byte header length and header bytes, json.loads them. Nothing else.

    python floor.py CHECKPOINT_DIR      # prints: <shards> <tensors> <header bytes read>
"""
import json
import os
import struct
import sys

root = sys.argv[1]
names = sorted(n for n in os.listdir(root) if n.endswith(".safetensors"))
tensors = 0
nbytes = 0
for name in names:
    with open(os.path.join(root, name), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    tensors += len(header) - ("__metadata__" in header)
    nbytes += 8 + n
print(len(names), tensors, nbytes)
