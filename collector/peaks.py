"""Datasheet peaks for % of roofline, by device name.

Dense tensor-core FLOP/s per compute dtype, HBM bytes/s, and the maximum SM clock at which
the FLOP/s peak is quoted (to scale the peak to the clock a run actually measured).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    flops: dict[str, float]
    hbm_bytes_s: float
    max_sm_mhz: float


_HOPPER_FLOPS = {
    "bfloat16": 989e12,
    "float16": 989e12,
    "fp8": 1979e12,
    "fp8_block": 1979e12,
    "float32": 494e12,  # TF32 tensor cores
}
PEAKS: dict[str, Peak] = {
    "H200": Peak(_HOPPER_FLOPS, 4.8e12, 1980.0),
    "H100": Peak(_HOPPER_FLOPS, 3.35e12, 1980.0),
    "B200": Peak(
        {"bfloat16": 2250e12, "float16": 2250e12, "fp8": 4500e12, "fp8_block": 4500e12},
        8.0e12,
        1965.0,
    ),
}


def peak_for(device_name: str) -> Peak | None:
    for key, peak in PEAKS.items():
        if key in device_name:
            return peak
    return None


def roofline_pct(
    device_name: str,
    compute_dtype: str,
    flops: float,
    nbytes: float,
    latency_ms: float,
    sm_mhz: float | None = None,
) -> tuple[float | None, float | None]:
    """% of the roofline bound at the datasheet peak, and at the measured SM clock."""
    peak = peak_for(device_name)
    if peak is None or latency_ms <= 0 or compute_dtype not in peak.flops:
        return None, None
    seconds = latency_ms / 1e3
    bound = max(flops / peak.flops[compute_dtype], nbytes / peak.hbm_bytes_s)
    at_clock = None
    if sm_mhz:
        scaled = peak.flops[compute_dtype] * min(1.0, sm_mhz / peak.max_sm_mhz)
        at_clock = 100.0 * max(flops / scaled, nbytes / peak.hbm_bytes_s) / seconds
    return 100.0 * bound / seconds, at_clock
