# mkb-adversarial: dsl=cutedsl device=cuda expect=decoration
# problem: mlp_norm/02_silu_and_mul
# hack: torch's jiterator compiles CUDA C++ at run time (NVRTC under the hood) that computes silu(gate) * up in float32; the only CuTe kernel casts that to bfloat16 into the output, so the outputs are DSL-written and fail under knockout and scramble; the jiterator kernel is neither aten's nor named after ATen, so a record that calls every such kernel the DSL's reads a DSL share near 1
# must be rejected because: no CuTe DSL compile produced the jiterator's kernel, so its time counts as work outside the DSL (work_evidence.unnamed_us), and at 40 % or more of the eager reference's device time it did the reference's work whatever the share (the GPU yardstick: on the H200 the naive cast, 186 µs, outweighed the jiterator's 164 µs, share 53 %, and the share rule alone passed it)
# skip-static: true
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack
from torch.cuda.jiterator import _create_jit_fn

THREADS = 256
_silu_mul = _create_jit_fn("template <typename T> T silu_mul(T g, T u) { return g / (T(1) + exp(-g)) * u; }")
_compiled = {}


@cute.kernel
def _cast_kernel(gE: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gY[row, j] = gE[row, j].to(gY.element_type)


@cute.jit
def _cast(mE: cute.Tensor, mY: cute.Tensor):
    _cast_kernel(mE, mY).launch(grid=(mY.shape[0], mY.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor):
    d = x.shape[-1] // 2
    computed = _silu_mul(x[:, :d].float(), x[:, d:].float())  # the work, in a kernel no DSL compile produced
    out = torch.empty(x.shape[0], d, dtype=x.dtype, device=x.device)
    args = [from_dlpack(t) for t in (computed, out)]
    key = tuple(x.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_cast, *args)
    _compiled[key](*args)
    return out
