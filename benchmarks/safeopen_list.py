"""What a hand-written script would do: safetensors.safe_open every shard and list every key,
dtype and shape.

    python safeopen_list.py CHECKPOINT_DIR  # prints: <shards> <tensors>
"""
import os
import sys

from safetensors import safe_open

root = sys.argv[1]
names = sorted(n for n in os.listdir(root) if n.endswith(".safetensors"))
listing = []
for name in names:
    with safe_open(os.path.join(root, name), framework="numpy") as f:
        for key in f.keys():
            sl = f.get_slice(key)
            listing.append((key, sl.get_dtype(), tuple(sl.get_shape())))
print(len(names), len(listing))
