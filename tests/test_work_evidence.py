"""How the GPU decoration evidence classifies one device event (kernel_runner/evidence.kernel_kind).

Names are CUPTI's and PyTorch's as they appear in torch.profiler records; the operator is the frontend event the
profiler linked the kernel to. The end-to-end proof is on the H200: the honest solutions of kv_cache/05 (a DSL
kernel named copy_blocks) and the prefill problems pass, and tests/adversarial/cute_v2_decoration_cublas_gemm.py
(eager cuBLAS GEMM, DSL epilogue) is rejected.
"""
from mkb_ray.kernel_runner.evidence import kernel_kind


def test_dsl_kernels_are_the_dsls_whatever_the_candidate_named_them():
    for name in ("kernel_cutlass__copy_blocks_kernel_tensorptrf16", "copy_blocks_kernel", "varlen_prefill_kernel",
                 "fill_missing_slots_kernel", "default_function_kernel", "main_kernel"):
        assert kernel_kind(name) == "dsl", name


def test_pytorch_kernels_are_pytorchs_by_operator_even_when_their_name_hides_it():
    gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
    assert kernel_kind(gemm, "aten::mm") == "torch"
    assert kernel_kind("nvjet_tst_128x64_64x8_2x1_v_bz_TNT", "aten::addmm") == "torch"
    # A cast or a fill under PyTorch's own glue operators is glue; the same kernel under a compute op is not.
    cast = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)>"
    assert kernel_kind(cast, "aten::copy_") == "glue"
    assert kernel_kind("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                       "aten::fill_") == "glue"
    assert kernel_kind("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "aten::sum") == "torch"


def test_without_a_linked_operator_the_name_decides():
    assert kernel_kind("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>") == "glue"
    assert kernel_kind("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>") == "torch"
    assert kernel_kind("Memcpy DtoD (Device -> Device)") == "glue"
    assert kernel_kind("Memset (Device)") == "glue"


def test_host_round_trips_are_work_not_glue():
    assert kernel_kind("Memcpy DtoH (Device -> Pageable)") == "torch"
    assert kernel_kind("Memcpy HtoD (Pageable -> Device)", "aten::copy_") == "torch"
