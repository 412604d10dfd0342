"""Int8 KV-cache append with per-token-per-head scales (Qwen2.5-7B decode batch, FlashInfer HND paged layout), in place: for key (kv = 0) and value (kv = 1), per token and KV head scale = max(amax|x|, 1e-6) / 127 in fp32 (symmetric absmax), q = clamp(round(x / scale), -127, 127) as int8; kv_cache[blk, kv, head, off, :] = q and kv_scales[blk, kv, head, off] = scale with blk, off = divmod(slot_mapping[t], BLOCK_SIZE); returns None."""
import torch

TOKENS = 1024       # tokens appended in one step (a 1024-sequence decode batch)
KV_HEADS = 4        # Qwen2.5-7B num_key_value_heads
HEAD_DIM = 128      # Qwen2.5-7B head_dim (hidden 3584 / 28 heads)
BLOCK_SIZE = 16     # KV-cache block size
NUM_BLOCKS = 2048   # paged-cache blocks (32768 slots)
INT8_MAX = 127.0    # symmetric int8 range [-127, 127]
SCALE_MIN = 1e-6    # floor on amax so an all-zero head gets a finite scale


@torch.no_grad()
def reference(key, value, kv_cache, kv_scales, slot_mapping):
    # key/value: (TOKENS, KV_HEADS, HEAD_DIM) bf16; kv_cache: (NUM_BLOCKS, 2, KV_HEADS, BLOCK_SIZE, HEAD_DIM) int8;
    # kv_scales: (NUM_BLOCKS, 2, KV_HEADS, BLOCK_SIZE) float32; slot_mapping: (TOKENS,) int64, distinct slots.
    acc = torch.float64 if key.dtype == torch.float64 else torch.float32
    bsize = kv_cache.shape[3]
    blk, off = slot_mapping // bsize, slot_mapping % bsize
    for kv, x in enumerate((key, value)):
        xf = x.to(acc)
        scale = xf.abs().amax(dim=-1).clamp(min=SCALE_MIN) / INT8_MAX
        q = torch.round(xf / scale.unsqueeze(-1)).clamp(-INT8_MAX, INT8_MAX)
        kv_cache[blk, kv, :, off, :] = q.to(kv_cache.dtype)        # (TOKENS, KV_HEADS, HEAD_DIM)
        kv_scales[blk, kv, :, off] = scale.to(kv_scales.dtype)     # (TOKENS, KV_HEADS)


def _tie_free(x):
    # x / (amax / 127) lands exactly on k + 0.5 only when |x| = amax / 2 (k = 63), or when amax's 8-bit bf16
    # significand is 254 (= 2 * 127). Bump each such head's largest element one bf16 step away from zero
    # (significand 255: it stays the unique absmax), then move elements equal to +-amax / 2 one bf16 step away
    # from zero (still below amax). Scaling by a power of two (outlier draws) keeps the inputs tie-free.
    xf = x.float()
    amax, idx = xf.abs().max(dim=-1, keepdim=True)
    significand = amax / torch.exp2(torch.floor(torch.log2(amax)))
    bump = torch.where(significand == 254.0 / 128.0, 255.0 / 254.0, 1.0)
    xf.scatter_(-1, idx, xf.gather(-1, idx) * bump)
    x = xf.to(torch.bfloat16)
    half = x.float().abs().amax(dim=-1, keepdim=True) / 2
    away = torch.nextafter(x, torch.where(x < 0, -float("inf"), float("inf")).to(x.dtype))
    return torch.where(x.float().abs() == half, away, x)


def make_inputs():
    key = _tie_free(torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16))
    value = _tie_free(torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16))
    # Earlier cache contents (must survive untouched outside the appended slots).
    kv_cache = torch.randint(-127, 128, (NUM_BLOCKS, 2, KV_HEADS, BLOCK_SIZE, HEAD_DIM), dtype=torch.int8)
    kv_scales = 0.002 + 0.03 * torch.rand(NUM_BLOCKS, 2, KV_HEADS, BLOCK_SIZE)
    slot_mapping = torch.randperm(NUM_BLOCKS * BLOCK_SIZE)[:TOKENS]
    return [key, value, kv_cache, kv_scales, slot_mapping]
