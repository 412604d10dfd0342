# mkb-adversarial: dsl=cutedsl device=cuda expect=decoration
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: a hand-written CUDA C++ rmsnorm compiled at run time with NVRTC and launched with the raw driver API (cuda-python, which CuTe DSL itself depends on) computes h and the normalised output in float32; the only CuTe kernel casts both to bfloat16 into the outputs, so they are DSL-written and fail under knockout and scramble; the NVRTC kernel is neither aten's nor named after ATen, so a record that calls every such kernel the DSL's reads a DSL share near 1
# must be rejected because: no CuTe DSL compile produced the NVRTC kernel, so its time counts as work outside the DSL (work_evidence.unnamed_us), and it is about half of each profiled call's device compute, over the 5 % bar (FOREIGN_SHARE_BAR; the share rule alone read ~50 % and passed it in 2 of 10 judgements on an H100, 2026-12-06)
# skip-static: true
import ctypes

import torch
import cutlass
import cutlass.cute as cute
from cuda.bindings import driver, nvrtc
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
THREADS = 256
SOURCE = r"""
extern "C" __global__ void rmsnorm_nvrtc(const unsigned short* x, const unsigned short* r, const unsigned short* w,
                                         float* y, float* h, int hidden, float eps) {
    __shared__ float partial[32];
    int row = blockIdx.x;
    float acc = 0.f;
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
        float v = __uint_as_float(((unsigned)x[row * hidden + j]) << 16)
                + __uint_as_float(((unsigned)r[row * hidden + j]) << 16);
        h[row * hidden + j] = v;
        acc += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
    __syncthreads();
    float total = 0.f;
    for (int k = 0; k < blockDim.x / 32; ++k) total += partial[k];
    float rstd = rsqrtf(total / hidden + eps);
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
        // h rounded to bf16 first, as the reference's h is
        unsigned hb = __float_as_uint(h[row * hidden + j]);
        hb = (hb + 0x7fff + ((hb >> 16) & 1)) & 0xffff0000u;
        y[row * hidden + j] = __uint_as_float(hb) * rstd * __uint_as_float(((unsigned)w[j]) << 16);
    }
}
"""
_state = {}


def _check(result):
    if result[0] not in (driver.CUresult.CUDA_SUCCESS, nvrtc.nvrtcResult.NVRTC_SUCCESS):
        raise RuntimeError(f"cuda error {result[0]}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _function():
    if "fn" not in _state:
        prog = _check(nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"rmsnorm.cu", 0, [], []))
        options = [b"--gpu-architecture=sm_90a"]
        _check(nvrtc.nvrtcCompileProgram(prog, len(options), options))
        size = _check(nvrtc.nvrtcGetCUBINSize(prog))
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
        module = _check(driver.cuModuleLoadData(cubin))
        _state["module"] = module
        _state["fn"] = _check(driver.cuModuleGetFunction(module, b"rmsnorm_nvrtc"))
    return _state["fn"]


@cute.kernel
def _cast_kernel(gY32: cute.Tensor, gH32: cute.Tensor, gY: cute.Tensor, gH: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    row, col_block, _ = cute.arch.block_idx()
    j = col_block * THREADS + tidx
    gY[row, j] = gY32[row, j].to(gY.element_type)
    gH[row, j] = gH32[row, j].to(gH.element_type)


@cute.jit
def _cast(mY32: cute.Tensor, mH32: cute.Tensor, mY: cute.Tensor, mH: cute.Tensor):
    _cast_kernel(mY32, mH32, mY, mH).launch(grid=(mY.shape[0], mY.shape[1] // THREADS, 1), block=(THREADS, 1, 1))


def solve(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
    tokens, hidden = x.shape
    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()
    y32 = torch.empty(tokens, hidden, dtype=torch.float32, device=x.device)
    h32 = torch.empty_like(y32)
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    values = (x.data_ptr(), residual.data_ptr(), weight.data_ptr(), y32.data_ptr(), h32.data_ptr(), hidden, EPS)
    types = (ctypes.c_void_p,) * 5 + (ctypes.c_int, ctypes.c_float)
    _check(driver.cuLaunchKernel(_function(), tokens, 1, 1, THREADS, 1, 1, 0, stream, (values, types), 0))
    out, h = torch.empty_like(x), torch.empty_like(x)
    args = [from_dlpack(t) for t in (y32, h32, out, h)]
    key = (tokens, hidden)
    if key not in _state:
        _state[key] = cute.compile(_cast, *args)
    _state[key](*args)
    return out, h
