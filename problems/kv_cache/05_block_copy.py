"""Paged KV-cache block copy for beam fork / swap (vLLM copy_blocks, Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 128, block 16), in place: for every (src, dst) pair of block_mapping and every layer's key and value cache, kv_caches[layer, kv, dst] = kv_caches[layer, kv, src] (sources and destinations are disjoint, destinations distinct, a source may be forked to several destinations); returns None."""
import torch

LAYERS = 32        # Llama-3.1-8B num_hidden_layers
KV_HEADS = 8       # Llama-3.1-8B num_key_value_heads
HEAD_DIM = 128     # Llama-3.1-8B head_dim
BLOCK_SIZE = 16    # vLLM default KV-cache block size
NUM_BLOCKS = 128   # paged-cache blocks per layer (kept small: the stacked caches are 256 MiB)
NUM_SRC = 32       # distinct source blocks (the shared prefixes being forked)
NUM_PAIRS = 64     # (src, dst) block pairs in one copy_blocks call


@torch.no_grad()
def reference(kv_caches, block_mapping):
    # kv_caches: (LAYERS, 2, NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM) bf16 (index 1: 0 = key, 1 = value);
    # block_mapping: (NUM_PAIRS, 2) int64 of (src, dst).
    src, dst = block_mapping[:, 0], block_mapping[:, 1]
    kv_caches[:, :, dst] = kv_caches[:, :, src]


def make_inputs():
    kv_caches = torch.randn(LAYERS, 2, NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)
    blocks = torch.randperm(NUM_BLOCKS)
    sources, dests = blocks[:NUM_SRC], blocks[NUM_SRC:NUM_SRC + NUM_PAIRS]
    src = sources[torch.randint(0, NUM_SRC, (NUM_PAIRS,))]
    block_mapping = torch.stack((src, dests), dim=1).contiguous()
    return [kv_caches, block_mapping]
