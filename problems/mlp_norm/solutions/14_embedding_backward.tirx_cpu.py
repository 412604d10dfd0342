"""CPU-target (LLVM) TIRx solution, the GPU solutions' ownership scheme run serially: the vocabulary is split into
32 residue classes (id mod 32); for each class, the tokens whose id falls in the class are added in batch order,
dW[id, j] += fp32(d_out[i, j]). Every gradient element has one owner and its additions happen in batch order: no
atomics, no sort, deterministic."""
import torch
import tvm
from tvm.script import tirx as T

PARTS = 32  # residue classes of the vocabulary (the GPU's grid y)
_compiled = {}


def _build(tokens: int, vocab: int, hidden: int):
    @T.prim_func
    def embedding_backward(i_ptr: T.handle, d_ptr: T.handle, w_ptr: T.handle):
        IDS = T.match_buffer(i_ptr, (tokens,), "int64")
        DO = T.match_buffer(d_ptr, (tokens, hidden), "bfloat16")
        DW = T.match_buffer(w_ptr, (vocab, hidden), "float32")
        for p in T.serial(PARTS):
            for i in T.serial(tokens):
                if T.truncmod(IDS[i], T.int64(PARTS)) == T.int64(p):
                    for j in T.serial(hidden):
                        DW[IDS[i], j] = DW[IDS[i], j] + T.Cast("float32", DO[i, j])

    return tvm.compile(tvm.IRModule({"main": embedding_backward}), target="llvm", tir_pipeline="tirx")["main"]


def solve(token_ids: torch.Tensor, d_out: torch.Tensor, dw: torch.Tensor):
    tokens, hidden = d_out.shape
    vocab = dw.shape[0]
    if token_ids.dtype != torch.int64 or d_out.dtype != torch.bfloat16 or dw.dtype != torch.float32:
        raise ValueError("expects int64 token_ids, bfloat16 d_out and a float32 dw")
    if tuple(token_ids.shape) != (tokens,) or tuple(dw.shape) != (vocab, hidden):
        raise ValueError("token_ids must be (TOKENS,) and dw (VOCAB, HIDDEN)")
    if not dw.is_contiguous():
        raise ValueError("dw must be contiguous (it is updated in place)")
    key = (tokens, vocab, hidden)
    if key not in _compiled:
        _compiled[key] = _build(*key)
    _compiled[key](token_ids.contiguous(), d_out.contiguous(), dw)
