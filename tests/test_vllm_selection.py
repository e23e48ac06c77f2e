"""What vLLM 0.24.0 runs a shipped attention case with on an H200, and that the bundle has it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from bot.bundle import BundleSpec, lacking, load_spec
from collector.attn_backends import AUTO, VLLM_ATTN_BACKENDS
from collector.backends.vllm_selection import KERNEL_PACKAGES, sm90_kernel, sm90_packages
from collector.caseplan import Case, builtin_case_text, cases_from_documents, load_case_documents
from tests.factories import attention_params

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "images" / "vllm-bundle.yaml"
ATTN_OPS = ("context_attention", "generation_attention")


@pytest.mark.parametrize(
    ("backend", "head", "kernel"),
    [
        (AUTO, 64, "fa3"),
        (AUTO, 256, "fa3"),
        (AUTO, 512, "fa4"),  # FA3 stops at 256 on SM90: vLLM upgrades to FA4
        ("FLASH_ATTN", 128, "fa3"),
        ("FLASH_ATTN", 512, "fa4"),
        ("FLASHINFER", 128, "flashinfer"),
        ("FLASHINFER", 512, "flashinfer"),
        ("TRITON_ATTN", 128, "triton_attn"),
        ("FLEX_ATTENTION", 64, "flex_attention"),
    ],
)
def test_sm90_selection(backend: str, head: int, kernel: str) -> None:
    params = attention_params(head_dim=head, attn_backend=backend, kv_cache_dtype="bfloat16")
    assert sm90_kernel(params) == kernel


def test_auto_falls_to_flashinfer_where_flash_attn_refuses_the_head() -> None:
    assert sm90_kernel(attention_params(head_dim=1024)) == "flashinfer"
    with pytest.raises(ValueError, match="FLASH_ATTN does not support head_dim 1024"):
        sm90_kernel(attention_params(head_dim=1024, attn_backend="FLASH_ATTN"))


def test_flex_attention_refuses_an_fp8_kv_cache() -> None:
    assert sm90_kernel(attention_params(kv_cache_dtype="bfloat16", attn_backend="FLEX_ATTENTION"))
    with pytest.raises(ValueError, match="FLEX_ATTENTION does not support an fp8 KV cache"):
        sm90_kernel(attention_params(kv_cache_dtype="fp8", attn_backend="FLEX_ATTENTION"))


def _shipped_cases() -> list[Case]:
    """Every attention case of every set in the built-in case files."""
    cases: list[Case] = []
    for op in ATTN_OPS:
        text, source = builtin_case_text(op)
        docs = load_case_documents(text, source)
        for name in {n for d in docs for n in d["sets"]}:
            cases += cases_from_documents(docs, name, source)
    return cases


def _needs(cases: list[Case]) -> dict[str, str]:
    """package -> a case that needs it; a case left at auto may be run with any backend
    (`collect --attn-backend`), so it needs what each of them needs."""
    need: dict[str, str] = {}
    for case in cases:
        named = case.params.get("attn_backend", AUTO)
        for backend in (named,) if named != AUTO else (AUTO, *VLLM_ATTN_BACKENDS):
            try:
                packages = sm90_packages({**case.params, "attn_backend": backend})
            except ValueError:
                continue  # vLLM refuses it: a classified failure, not a missing package
            for package in packages:
                need.setdefault(package, f"{case.key} via {backend}")
    return need


def test_the_bundle_has_what_every_shipped_case_needs_on_an_h200() -> None:
    spec = load_spec(SPEC)
    cases = _shipped_cases()
    assert any(c.params["head_dim"] == 512 for c in cases)  # the FA4 cases are shipped
    need = _needs(cases)
    assert "nvidia-cutlass-dsl" in need and "flashinfer-python" in need
    missing = {p: need[p] for p in lacking(spec, sorted(need))}
    assert not missing, f"the bundle lacks what shipped cases need: {missing}"
    excluded = {canonicalize_name(p) for p in need} & set(spec.excluded)
    assert not excluded, f"the bundle excludes what shipped cases need: {sorted(excluded)}"


def _without(spec: BundleSpec, name: str) -> BundleSpec:
    pins = tuple(p for p in spec.pins if canonicalize_name(p.name) != name)
    return dataclasses.replace(spec, pins=pins)


@pytest.mark.parametrize("package", ["nvidia-cutlass-dsl", "quack-kernels", "flashinfer-python"])
def test_the_check_fails_when_the_bundle_drops_a_needed_package(package: str) -> None:
    spec = _without(load_spec(SPEC), package)
    need = _needs(_shipped_cases())
    assert lacking(spec, sorted(need)) == [package]


def test_every_kernel_family_names_installable_packages() -> None:
    spec = load_spec(SPEC)
    for kernel, packages in KERNEL_PACKAGES.items():
        assert not lacking(spec, packages), kernel


def test_the_selection_rules_are_vllms_where_its_source_is_installed() -> None:
    """The two numbers the rules rest on, read from the installed vLLM's source."""
    try:
        import vllm
    except Exception as exc:
        pytest.skip(f"vLLM does not import here ({type(exc).__name__})")
    backends = Path(vllm.__file__).parent / "v1" / "attention" / "backends"
    flash = (backends / "flash_attn.py").read_text()
    assert "if head_size <= 256:" in flash and "return head_size <= 512" in flash
    upgrade = (backends / "fa_utils.py").read_text()
    assert "head_size > 256" in upgrade and "upgrading FlashAttention 3 -> 4" in upgrade
    cute = (Path(vllm.__file__).parent / "vllm_flash_attn" / "cute" / "interface.py").read_text()
    assert "import cutlass" in cute and "from quack" in cute
