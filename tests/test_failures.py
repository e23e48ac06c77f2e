from __future__ import annotations

import pytest

from collector.failures import (
    BACKEND_UNAVAILABLE,
    CUDA_FATAL,
    ERROR,
    OOM,
    TIMEOUT,
    UNSUPPORTED,
    classify_exception,
    group_key,
    normalise_message,
    poisons_context,
)


class AcceleratorError(RuntimeError):
    pass


class OutOfMemoryError(RuntimeError):
    pass


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RuntimeError("CUDA error: an illegal memory access was encountered"), CUDA_FATAL),
        (RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx"), CUDA_FATAL),
        (AcceleratorError("CUDA error: unspecified launch failure"), CUDA_FATAL),
        (RuntimeError("device-side assert triggered"), CUDA_FATAL),
        (OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), OOM),
        (ModuleNotFoundError("No module named 'vllm'"), BACKEND_UNAVAILABLE),
        (NotImplementedError("fp8_block"), UNSUPPORTED),
        (RuntimeError("no kernel image is available for execution on the device"), UNSUPPORTED),
        # vLLM 0.24.0's FA4 with an fp8 KV cache on an H200 (SM90).
        (
            AssertionError(
                "FP8 is only supported on SM100 (compute capability 10.x) for FA4 CuTe."
            ),
            UNSUPPORTED,
        ),
        (TimeoutError("case exceeded 60 s"), TIMEOUT),
        (ValueError("shapes do not match"), ERROR),
    ],
)
def test_classification(exc: BaseException, expected: str) -> None:
    assert classify_exception(exc) == expected


def test_only_cuda_fatal_poisons_the_context() -> None:
    assert poisons_context(CUDA_FATAL)
    assert not poisons_context(OOM)


def test_normalisation_merges_instances_of_one_failure() -> None:
    a = "Tried to allocate 2.00 GiB at 0x7f3a12 in /usr/lib/x/y.so (m=128)"
    b = "Tried to allocate 4.50 GiB at 0x1234 in /opt/z/w.so (m=4096)"
    assert normalise_message(a) == normalise_message(b)
    assert "float32" in normalise_message("dtype float32 unsupported")
    assert normalise_message("first line\nsecond line") == "first line"


def test_group_key_separates_ops_dtypes_and_classes() -> None:
    base = group_key("gemm", ERROR, "RuntimeError", "x 1", "bfloat16")
    assert base == group_key("gemm", ERROR, "RuntimeError", "x 2", "bfloat16")
    assert base != group_key("gemm", ERROR, "RuntimeError", "x 2", "fp8")
    assert base != group_key("gemm", OOM, "RuntimeError", "x 2", "bfloat16")
    assert base.startswith("gemm/error/RuntimeError/bfloat16/")
