"""CPU-target (LLVM) TIRx solution, the GPU solutions' algorithm run serially. Per row: each logit gets an
order-preserving integer key (its fp32 bits, the low 31 bits flipped for negatives, offset by 2^31 into
[0, 2^32)); a greedy 32-step radix select over the key bits finds the largest threshold with at least TOP_K keys
at or above it, i.e. the TOP_K-th largest key. One more pass writes -inf to every entry below it and compacts the
TOP_K survivors (value, index) in row order. For each survivor, scaled = logit / temperature; its mass before is
the sum of exp(scaled_c - max) over survivors c larger than it (ranking by pairwise comparison, no sort); it is
kept (scaled written) when that sum is below TOP_P times the survivors' total, else -inf."""
import torch
import tvm
from tvm.script import tirx as T

TOP_K = 50
TOP_P = 0.9
_compiled = {}


def _key(x):
    bits = T.Cast("int64", T.reinterpret("int32", x))
    return T.Select(bits >= T.int64(0), bits, T.bitwise_xor(bits, T.int64(0x7FFFFFFF))) + T.int64(2**31)


def _build(batch: int, vocab: int):
    @T.prim_func
    def topk_topp_mask(l_ptr: T.handle, t_ptr: T.handle, o_ptr: T.handle):
        L = T.match_buffer(l_ptr, (batch, vocab), "float32")
        TEMP = T.match_buffer(t_ptr, (batch,), "float32")
        O = T.match_buffer(o_ptr, (batch, vocab), "float32")
        cand_v = T.alloc_buffer((TOP_K,), "float32")
        cand_i = T.alloc_buffer((TOP_K,), "int32")
        thr = T.alloc_buffer((2,), "int64")  # 0: threshold so far, 1: trial threshold
        cnt = T.alloc_buffer((1,), "int32")
        red = T.alloc_buffer((3,), "float32")  # 0: max scaled, 1: total exp sum, 2: mass before
        for b in T.serial(batch):
            thr[0] = T.int64(0)
            for s in T.serial(32):
                thr[1] = thr[0] + T.shift_left(T.int64(1), T.Cast("int64", 31 - s))
                cnt[0] = 0
                for j in T.serial(vocab):
                    if _key(L[b, j]) >= thr[1]:
                        cnt[0] = cnt[0] + 1
                if cnt[0] >= TOP_K:
                    thr[0] = thr[1]
            cnt[0] = 0
            for j in T.serial(vocab):
                if _key(L[b, j]) >= thr[0]:
                    if cnt[0] < TOP_K:
                        cand_v[cnt[0]] = L[b, j]
                        cand_i[cnt[0]] = j
                    cnt[0] = cnt[0] + 1
                else:
                    O[b, j] = T.float32(float("-inf"))
            red[0] = T.float32(-3.0e38)
            for c in T.serial(TOP_K):
                red[0] = T.max(red[0], cand_v[c] / TEMP[b])
            red[1] = T.float32(0)
            for c in T.serial(TOP_K):
                red[1] = red[1] + T.exp(cand_v[c] / TEMP[b] - red[0])
            for i in T.serial(TOP_K):
                red[2] = T.float32(0)
                for c in T.serial(TOP_K):
                    if cand_v[c] > cand_v[i]:
                        red[2] = red[2] + T.exp(cand_v[c] / TEMP[b] - red[0])
                O[b, cand_i[i]] = T.Select(red[2] < T.float32(TOP_P) * red[1], cand_v[i] / TEMP[b],
                                           T.float32(float("-inf")))

    return tvm.compile(tvm.IRModule({"main": topk_topp_mask}), target="llvm", tir_pipeline="tirx")["main"]


def solve(logits: torch.Tensor, temperature: torch.Tensor):
    batch, vocab = logits.shape
    if logits.dtype != torch.float32 or temperature.dtype != torch.float32:
        raise ValueError("expects float32 logits and temperature")
    if tuple(temperature.shape) != (batch,) or vocab < TOP_K:
        raise ValueError("temperature must be (BATCH,) and VOCAB >= TOP_K")
    key = (batch, vocab)
    if key not in _compiled:
        _compiled[key] = _build(batch, vocab)
    out = torch.empty_like(logits)
    _compiled[key](logits.contiguous(), temperature.contiguous(), out)
    return out
