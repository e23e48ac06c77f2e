#!/usr/bin/env bash
# Make vLLM 0.24.0's config and KV-spec classes importable on a CPU-only machine, beside (not
# into) the project's virtual environment, and run the tests that use them (the FP8-KV
# alignment, the attention backend names, the SM90 selection rules, and every shipped
# attention case's layer built through vLLM's selector on a pretend H200).
#
#   scripts/vllm-cpu-env.sh [DIR]     default DIR: /tmp/collectbot-vllm-cpu
#
# vLLM's wheel pins torch 2.11 and CUDA-only packages (flashinfer, cutlass, ...); none of them
# is needed to import `vllm.config` and `vllm.v1.kv_cache_interface` and to build a
# ModelConfig from a local config.json. So the wheel goes in with --no-deps, plus only the
# pure or CPU packages those imports need (found by importing until nothing was missing).
# Cost, measured: a 279 MB wheel (656 MB installed) and 240 MB of packages.
set -euo pipefail

DIR=${1:-/tmp/collectbot-vllm-cpu}
PY=${PYTHON:-.venv/bin/python}
mkdir -p "$DIR"
if [ ! -d "$DIR/site/vllm" ]; then
    "$PY" -m pip install -q --no-deps --target "$DIR/site" vllm==0.24.0
fi
if [ ! -d "$DIR/deps/transformers" ]; then
    "$PY" -m pip install -q --no-deps --target "$DIR/deps" \
        anyio==4.16.0 cachetools==8.0.2 cbor2==6.3.0 cloudpickle==3.1.3 einops==0.8.2 \
        h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2 huggingface_hub==2.4.0 msgspec==0.23.0 \
        openai==3.57.0 openai_harmony==0.0.8 pillow==13.0.0 psutil==7.2.2 py-cpuinfo==9.0.0 \
        pybase64==1.5.1 pyzmq==27.3.0 safetensors==0.8.0 sentencepiece==0.2.3 sniffio==1.3.1 \
        tokenizers==0.23.3 tqdm==4.70.1 transformers==5.24.0 truststore==0.10.5 uvloop==0.23.0
fi
# What building Attention layers on a pretend H200 needs beyond that (bench/vllm_selection_check.py).
if [ ! -d "$DIR/deps/flashinfer" ]; then
    "$PY" -m pip install -q --no-deps --target "$DIR/deps" \
        prometheus_client==0.26.0 flashinfer-python==0.6.12 apache-tvm-ffi==0.1.9
fi
PYTHONPATH="$PWD:$DIR/site:$DIR/deps" HF_HUB_OFFLINE=1 \
    "$PY" -m bench.vllm_selection_check 2>/dev/null | tail -1
PYTHONPATH="$PWD:$DIR/site:$DIR/deps" HF_HUB_OFFLINE=1 \
    "$PY" -m pytest -q -rs tests/test_vllm_fp8_kv_alignment.py \
    tests/test_attn_backend.py::test_the_names_are_vllms \
    tests/test_vllm_selection.py::test_the_selection_rules_are_vllms_where_its_source_is_installed \
    tests/test_vllm_fp8_quant_path.py
