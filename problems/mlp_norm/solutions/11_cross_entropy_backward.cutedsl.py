"""CuTe DSL (sm_90a) solution: one CTA of 256 threads per token row. The CTA first counts the non-ignored targets
of the batch (strided over its threads; warp shuffles, then one shared slot per warp). Thread tidx reads elements
tidx, tidx + 256, ... of the row once, keeping an online softmax pair in fp32 (running max m, sum s of exp(x - m),
rescaled whenever m grows); the pairs are merged CTA-wide by the row max M and S = sum of s * exp(m - M). A second
pass writes (exp(x - M) / S - [j == target]) * grad / n_valid in bf16, times 0 when the target is ignored."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

IGNORE_INDEX = -100
THREADS = 256
NUM_WARPS = THREADS // 32
NEG_BIG = -1.0e30  # initial running max: finite, so exp(NEG_BIG - m) is exactly 0 and never NaN
_compiled = {}


@cute.kernel
def _ce_backward_kernel(gL: cute.Tensor, gT: cute.Tensor, gG: cute.Tensor, gD: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    warp = tidx // 32
    lane = tidx % 32
    tokens = gL.shape[0]
    vocab = gL.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red_cnt = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    cnt = cutlass.Float32(0.0)
    for c in range((tokens + THREADS - 1) // THREADS):
        i = c * THREADS + tidx
        if i < tokens:
            if cutlass.Int32(gT[i]) != IGNORE_INDEX:
                cnt = cnt + cutlass.Float32(1.0)

    m = cutlass.Float32(NEG_BIG)
    s = cutlass.Float32(0.0)
    for k in range(vocab // THREADS):
        x = gL[row, k * THREADS + tidx].to(cutlass.Float32)
        m_new = cute.arch.fmax(m, x)
        s = s * cute.math.exp(m - m_new) + cute.math.exp(x - m_new)
        m = m_new

    cnt = cute.arch.warp_reduction_sum(cnt)
    wmax = cute.arch.warp_reduction_max(m)
    if lane == 0:
        red_cnt[warp] = cnt
        red_max[warp] = wmax
    cute.arch.sync_threads()
    n_valid = cutlass.Float32(0.0)
    row_max = cutlass.Float32(NEG_BIG)
    for w in cutlass.range_constexpr(NUM_WARPS):
        n_valid = n_valid + red_cnt[w]
        row_max = cute.arch.fmax(row_max, red_max[w])
    part = cute.arch.warp_reduction_sum(s * cute.math.exp(m - row_max))
    if lane == 0:
        red_sum[warp] = part
    cute.arch.sync_threads()
    row_sum = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        row_sum = row_sum + red_sum[w]

    tgt = cutlass.Int32(gT[row])
    keep = cutlass.Float32(1.0)
    if tgt == IGNORE_INDEX:
        keep = cutlass.Float32(0.0)
    coef = keep * gG[0] / cute.arch.fmax(n_valid, cutlass.Float32(1.0))
    for k in range(vocab // THREADS):
        j = k * THREADS + tidx
        p = cute.math.exp(gL[row, j].to(cutlass.Float32) - row_max) / row_sum
        if j == tgt:
            p = p - cutlass.Float32(1.0)
        gD[row, j] = (p * coef).to(gD.element_type)


@cute.jit
def _ce_backward(mL: cute.Tensor, mT: cute.Tensor, mG: cute.Tensor, mD: cute.Tensor):
    _ce_backward_kernel(mL, mT, mG, mD).launch(grid=(mL.shape[0], 1, 1), block=(THREADS, 1, 1))


def solve(logits: torch.Tensor, target: torch.Tensor, grad_loss: torch.Tensor):
    tokens, vocab = logits.shape
    if logits.dtype != torch.bfloat16 or target.dtype != torch.int64 or grad_loss.dtype != torch.float32:
        raise ValueError("expects bfloat16 logits, int64 target and a float32 grad_loss")
    if vocab % THREADS != 0:
        raise ValueError(f"VOCAB={vocab} must be a multiple of {THREADS}")
    if tuple(target.shape) != (tokens,) or grad_loss.numel() != 1:
        raise ValueError("target must be (TOKENS,) and grad_loss a single value")
    if logits.numel() >= 2**31:
        raise ValueError("logits too large for 32-bit indexing")
    logits = logits.contiguous()
    d_logits = torch.empty_like(logits)
    args = [from_dlpack(t) for t in (logits, target.contiguous(), grad_loss.reshape(1).contiguous(), d_logits)]
    key = (tokens, vocab)
    if key not in _compiled:
        _compiled[key] = cute.compile(_ce_backward, *args)
    _compiled[key](*args)
    return d_logits
