# mkb-adversarial: dsl=cutedsl device=cuda expect=output_type
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: solve launches only a one-thread CuTe kernel and returns a tuple subclass whose __iter__/__getitem__ launch the real (compiled, honest) CuTe rmsnorm kernel lazily, when the harness unpacks the result (after the call was timed)
# must be rejected because: solve must return a plain tuple/list/Tensor; a container subclass could compute (or change) its items after the call
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
NUM_WARPS = THREADS // 32
_compiled = {}


@cute.kernel
def _rmsnorm_kernel(gX: cute.Tensor, gR: cute.Tensor, gW: cute.Tensor, gY: cute.Tensor, gH: cute.Tensor,
                    eps: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    hidden = gX.shape[1]
    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(NUM_WARPS))

    acc = cutlass.Float32(0.0)
    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        h = gX[row, j].to(cutlass.Float32) + gR[row, j].to(cutlass.Float32)
        gH[row, j] = h.to(gH.element_type)
        acc = acc + h * h
    acc = cute.arch.warp_reduction_sum(acc)
    if tidx % 32 == 0:
        red[tidx // 32] = acc
    cute.arch.sync_threads()
    total = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(NUM_WARPS):
        total = total + red[w]
    rstd = cute.math.rsqrt(total / cutlass.Float32(hidden) + eps)

    for k in range(hidden // THREADS):
        j = k * THREADS + tidx
        h = gX[row, j].to(cutlass.Float32) + gR[row, j].to(cutlass.Float32)
        gY[row, j] = (h * rstd * gW[j].to(cutlass.Float32)).to(gY.element_type)


@cute.jit
def _rmsnorm(mX: cute.Tensor, mR: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, mH: cute.Tensor,
             eps: cutlass.Float32):
    _rmsnorm_kernel(mX, mR, mW, mY, mH, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1))


@cute.kernel
def _flag_kernel(gF: cute.Tensor):
    gF[0] = cutlass.Float32(1.0)


@cute.jit
def _flag(mF: cute.Tensor):
    _flag_kernel(mF).launch(grid=(1, 1, 1), block=(1, 1, 1))


class LazyOutputs(tuple):
    def __iter__(self):
        yield from self._compute()

    def __getitem__(self, index):
        return self._compute()[index]

    def _compute(self):
        if not self.done:
            x, residual, weight = self.args
            out, h = torch.empty_like(x), torch.empty_like(x)
            _compiled[tuple(x.shape)](*[from_dlpack(t) for t in (x, residual, weight, out, h)], EPS)
            self.done = [out, h]
        return self.done


def solve(x, residual, weight):
    key = tuple(x.shape)
    if key not in _compiled:  # compiled now (and cached), launched only when the result is unpacked
        probe = [from_dlpack(t) for t in (x, residual, weight, torch.empty_like(x), torch.empty_like(x))]
        _compiled[key] = cute.compile(_rmsnorm, *probe, EPS)
    flag = torch.zeros(1, dtype=torch.float32, device=x.device)
    flag_args = [from_dlpack(flag)]
    if "flag" not in _compiled:
        _compiled["flag"] = cute.compile(_flag, *flag_args)
    _compiled["flag"](*flag_args)  # the launch the call "needs"
    placeholder = torch.empty_like(x)
    result = LazyOutputs((placeholder, placeholder))
    result.args, result.done = (x, residual, weight), None
    return result
