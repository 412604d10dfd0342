"""TIRx (sm_90a) solution: one CTA of 256 threads per row, no sort. Each logit gets an order-preserving integer
key (its fp32 bits, the low 31 bits flipped for negatives, offset by 2^31 into [0, 2^32)). Radix select: 32
greedy steps over the key bits, each a strided pass over the row (L2-resident) with a CTA-wide count (two shared
scratch regions used alternately, so consecutive reductions never race), find the TOP_K-th largest key.
Compaction: every thread counts its survivors (keys at or above it), takes its offset as the sum of the counts of
the threads before it, and in one more pass writes -inf to the other entries and its survivors (value, index) to
shared memory. Threads 0..TOP_K-1 then each own one survivor: scaled = logit / temperature (IEEE division), the
survivors' max and exp sum, and the mass before it = sum of exp over the survivors larger than it (pairwise
ranking); it writes scaled when that mass is below TOP_P times the total, else -inf."""
import torch
import tvm
from tvm.script import tirx as T

TOP_K = 50
TOP_P = 0.9
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


def _key(x):
    bits = T.Cast("int64", T.reinterpret("int32", x))
    return T.Select(bits >= T.int64(0), bits, T.bitwise_xor(bits, T.int64(0x7FFFFFFF))) + T.int64(2**31)


def _div(a, b):
    # __fdiv_rn: IEEE division (TVM builds with --use_fast_math, where '/' is approximate)
    return T.call_pure_extern("float32", "__fdiv_rn", a, b)


def _build(batch: int, vocab: int):
    iters = vocab // THREADS

    @T.prim_func
    def topk_topp_mask(l_ptr: T.handle, t_ptr: T.handle, o_ptr: T.handle):
        L = T.match_buffer(l_ptr, (batch, vocab), "float32")
        TEMP = T.match_buffer(t_ptr, (batch,), "float32")
        O = T.match_buffer(o_ptr, (batch, vocab), "float32")
        T.device_entry()
        row = T.cta_id([batch])
        tx = T.thread_id([THREADS])
        scratch = T.alloc_shared((2 * NUM_WARPS,), "int32")
        counts = T.alloc_shared((THREADS,), "int32")
        cand_v = T.alloc_shared((TOP_K,), "float32")
        cand_i = T.alloc_shared((TOP_K,), "int32")
        thr = T.alloc_local((2,), "int64")  # 0: threshold so far, 1: trial threshold
        cnt = T.alloc_local((2,), "int32")  # 0: count, 1: write offset
        red = T.alloc_local((4,), "float32")  # 0: max scaled, 1: total exp sum, 2: mass before, 3: own scaled
        thr[0] = T.int64(0)
        for s in T.serial(32):
            thr[1] = thr[0] + T.shift_left(T.int64(1), T.Cast("int64", 31 - s))
            cnt[0] = 0
            for k in T.serial(iters):
                if _key(L[row, k * THREADS + tx]) >= thr[1]:
                    cnt[0] = cnt[0] + 1
            if T.cuda.cta_sum(cnt[0], NUM_WARPS, scratch.ptr_to([(s % 2) * NUM_WARPS])) >= TOP_K:
                thr[0] = thr[1]
        cnt[0] = 0
        for k in T.serial(iters):
            if _key(L[row, k * THREADS + tx]) >= thr[0]:
                cnt[0] = cnt[0] + 1
        counts[tx] = cnt[0]
        T.cuda.cta_sync()
        cnt[1] = 0
        for t in T.serial(tx):
            cnt[1] = cnt[1] + counts[t]
        for k in T.serial(iters):
            j = k * THREADS + tx
            if _key(L[row, j]) >= thr[0]:
                if cnt[1] < TOP_K:
                    cand_v[cnt[1]] = L[row, j]
                    cand_i[cnt[1]] = j
                cnt[1] = cnt[1] + 1
            else:
                O[row, j] = T.float32(float("-inf"))
        T.cuda.cta_sync()
        if tx < TOP_K:
            red[0] = T.float32(-3.0e38)
            for c in T.serial(TOP_K):
                red[0] = T.max(red[0], _div(cand_v[c], TEMP[row]))
            red[1] = T.float32(0)
            red[2] = T.float32(0)
            for c in T.serial(TOP_K):
                e = T.exp(_div(cand_v[c], TEMP[row]) - red[0])
                red[1] = red[1] + e
                if cand_v[c] > cand_v[tx]:
                    red[2] = red[2] + e
            red[3] = _div(cand_v[tx], TEMP[row])
            O[row, cand_i[tx]] = T.Select(red[2] < T.float32(TOP_P) * red[1], red[3], T.float32(float("-inf")))

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": topk_topp_mask}), target=target, tir_pipeline="tirx")["main"]


def solve(logits: torch.Tensor, temperature: torch.Tensor):
    batch, vocab = logits.shape
    if logits.dtype != torch.float32 or temperature.dtype != torch.float32:
        raise ValueError("expects float32 logits and temperature")
    if tuple(temperature.shape) != (batch,):
        raise ValueError("temperature must be (BATCH,)")
    if vocab % THREADS != 0 or vocab < TOP_K:
        raise ValueError(f"VOCAB={vocab} must be a multiple of {THREADS} and at least TOP_K={TOP_K}")
    key = (batch, vocab)
    if key not in _compiled:
        _compiled[key] = _build(batch, vocab)
    out = torch.empty_like(logits)
    _compiled[key](logits.contiguous(), temperature.contiguous(), out)
    return out
