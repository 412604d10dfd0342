# mkb-adversarial: dsl=cutedsl device=cuda expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: imports CuTe DSL internals (cutlass._mlir, cutlass.base_dsl) to emit and run IR outside cute.compile
# must be rejected because: the DSL's internals are banned imports; only its public compile entry point may be used
import torch
import cutlass.cute as cute
from cutlass._mlir import ir
from cutlass.base_dsl import dsl as base_dsl


def solve(x, residual, weight):
    with ir.Context():
        module = ir.Module.parse("module {}")
    return x, x
