"""CuTe DSL (sm_90a) solution, deterministic and atomic-free: grid (HIDDEN / 256 channel blocks, 32 residue
classes of the vocabulary). Thread tidx of CTA (cb, p) owns channel j = cb * 256 + tidx of every gradient row whose
id is congruent to p mod 32. It walks the token ids in batch order (the same id for the whole warp: a broadcast
load and a uniform branch) and, for the tokens of its class, does dW[id, j] += fp32(d_out[i, j]) (coalesced across
the warp). No two threads ever touch the same address, so no atomics and no sort are needed, and each row's
additions happen in batch order: the result is bit-reproducible."""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 256
PARTS = 32
_compiled = {}


@cute.kernel
def _embedding_backward_kernel(gI: cute.Tensor, gD: cute.Tensor, gW: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    cb, p, _ = cute.arch.block_idx()
    j = cb * THREADS + tidx
    for i in range(gD.shape[0]):
        tok = cutlass.Int32(gI[i])
        if tok % PARTS == p:
            gW[tok, j] = gW[tok, j] + gD[i, j].to(cutlass.Float32)


@cute.jit
def _embedding_backward(mI: cute.Tensor, mD: cute.Tensor, mW: cute.Tensor):
    _embedding_backward_kernel(mI, mD, mW).launch(grid=(mD.shape[1] // THREADS, PARTS, 1), block=(THREADS, 1, 1))


def solve(token_ids: torch.Tensor, d_out: torch.Tensor, dw: torch.Tensor):
    tokens, hidden = d_out.shape
    vocab = dw.shape[0]
    if token_ids.dtype != torch.int64 or d_out.dtype != torch.bfloat16 or dw.dtype != torch.float32:
        raise ValueError("expects int64 token_ids, bfloat16 d_out and a float32 dw")
    if tuple(token_ids.shape) != (tokens,) or tuple(dw.shape) != (vocab, hidden):
        raise ValueError("token_ids must be (TOKENS,) and dw (VOCAB, HIDDEN)")
    if hidden % THREADS != 0:
        raise ValueError(f"HIDDEN={hidden} must be a multiple of {THREADS}")
    if not dw.is_contiguous() or dw.numel() >= 2**31:
        raise ValueError("dw must be contiguous (it is updated in place) and below 2**31 elements")
    args = [from_dlpack(t) for t in (token_ids.contiguous(), d_out.contiguous(), dw)]
    key = (tokens, vocab, hidden)
    if key not in _compiled:
        _compiled[key] = cute.compile(_embedding_backward, *args)
    _compiled[key](*args)
