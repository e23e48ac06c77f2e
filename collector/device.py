"""Where a run executed: the device fingerprint and per-sample clock readings."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any

# Clocks-event (throttle) reason bits from NVML that mean the clock was held down.
_THROTTLE_MASK = (
    0x0000000000000004  # SW power cap
    | 0x0000000000000008  # HW slowdown
    | 0x0000000000000020  # SW thermal slowdown
    | 0x0000000000000040  # HW thermal slowdown
    | 0x0000000000000080  # HW power brake slowdown
)


@dataclass
class ClockReading:
    sm_mhz: float | None
    power_w: float | None
    throttle_reasons: int


class ClockReader:
    """Reads the SM clock, power and throttle reasons through NVML; no-ops on a CPU."""

    def __init__(self, device: str, index: int = 0) -> None:
        self._handle: Any = None
        self._nvml: Any = None
        if not device.startswith("cuda"):
            return
        try:
            self._nvml, self._handle = nvml_handle(index)
        except Exception:  # NVML missing or not permitted: timings stand, clocks unknown.
            self._handle = None

    @property
    def available(self) -> bool:
        return self._handle is not None

    def read(self) -> ClockReading:
        if self._handle is None:
            return ClockReading(None, None, 0)
        nv = self._nvml
        try:
            sm = float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM))
        except Exception:
            return ClockReading(None, None, 0)
        try:
            power: float | None = nv.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
        except Exception:
            power = None
        # Newer NVML names throttle reasons "clocks event reasons"; older ones do not.
        getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        try:
            reasons = int(getter(self._handle)) if getter else 0
        except Exception:
            reasons = 0
        return ClockReading(sm, power, reasons)

    @staticmethod
    def throttled(reasons: int) -> bool:
        return bool(reasons & _THROTTLE_MASK)


def nvml_handle(index: int) -> tuple[Any, Any]:
    """pynvml, initialised, and the handle of the device torch calls `index` (raises when
    NVML is missing or not permitted)."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(_physical_index(index))


def _physical_index(index: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    if ids and index < len(ids) and ids[index].isdigit():
        return int(ids[index])
    return index


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_standin_uuid(slot: int) -> str:
    """A CPU worker's stand-in device identity: the host and the slot, so that several CPU
    workers act as distinct devices and the fleet logic runs for real on a CPU."""
    return f"CPU-{platform.node() or 'host'}-{slot}"


def fingerprint(device: str, slot: int = 0) -> dict[str, Any]:
    """Everything that makes two latencies comparable or not (kept in run.json)."""
    import torch

    info: dict[str, Any] = {
        "kind": "cuda" if device.startswith("cuda") else "cpu",
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if not device.startswith("cuda"):
        info["name"] = f"CPU ({info['cpu']})"
        info["uuid"] = cpu_standin_uuid(slot)
        info["index"] = slot
        info["l2_bytes"] = 0
        return info
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    info.update(
        name=props.name,
        index=index,
        uuid=str(getattr(props, "uuid", "")),
        sm=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        l2_bytes=int(getattr(props, "L2_cache_size", 0)),
        memory_bytes=int(props.total_memory),
        cuda=torch.version.cuda,
    )
    info.update(_nvml_details(index))
    return info


def _nvml_details(index: int) -> dict[str, Any]:
    try:
        pynvml, h = nvml_handle(index)
        details: dict[str, Any] = {
            "driver": _s(pynvml.nvmlSystemGetDriverVersion()),
            "uuid": _s(pynvml.nvmlDeviceGetUUID(h)),
            "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "sm_clock_mhz_start": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        }
        return details
    except Exception as exc:
        return {"nvml": f"unavailable: {type(exc).__name__}"}


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_compute_capability(index: int) -> tuple[int, int] | None:
    """The device's compute capability from NVML, which makes no CUDA context (None when
    NVML cannot say): what a process may learn before its turn on the GPU."""
    try:
        pynvml, h = nvml_handle(index)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
        return int(major), int(minor)
    except Exception:
        return None


def holds_cuda_context(index: int, pid: int) -> bool | None:
    """Whether process `pid` has a CUDA context on the device, as NVML lists them (None when
    NVML cannot say)."""
    try:
        pynvml, h = nvml_handle(index)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        return any(int(p.pid) == pid for p in procs)
    except Exception:
        return None
