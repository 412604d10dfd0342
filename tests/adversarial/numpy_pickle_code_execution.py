# mkb-adversarial: dsl=tirx device=cpu expect=static
# problem: mlp_norm/01_fused_add_rmsnorm
# hack: writes a pickle (bytes literal) with ndarray.tofile and loads it with np.load(allow_pickle=True): arbitrary code, invisible to the AST
# must be rejected because: file writes, numpy/torch load/save and unpickling keywords are banned by the source rules
import numpy as np
import torch

# pickle.dumps of an object whose __reduce__ is exec("print('unpickled')")
_PAYLOAD = (b"\x80\x04\x95.\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x04exec\x94\x93\x94"
            b"\x8c\x12print('unpickled')\x94\x85\x94R\x94.")


def solve(x, residual, weight):
    np.frombuffer(_PAYLOAD, dtype=np.uint8).tofile("payload.bin")
    np.load("payload.bin", allow_pickle=True)
    return x, x
