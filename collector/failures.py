"""Failure records: classify what went wrong and give each failure a stable group key.

Doctrine: observe failures, never predict or hide them. A failure is
classified from the exception or the way the worker ended, not from the case's parameters.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

# Classifications, most specific first. `cuda_fatal` poisons the CUDA context: the worker
# that saw it must be replaced after the failure is recorded.
CUDA_FATAL = "cuda_fatal"
OOM = "oom"
UNSUPPORTED = "unsupported"
BACKEND_UNAVAILABLE = "backend_unavailable"
TIMEOUT = "timeout"
CRASH = "crash"
INVALID_OUTPUT = "invalid_output"
ERROR = "error"
CLASSIFICATIONS = (
    CUDA_FATAL,
    OOM,
    UNSUPPORTED,
    BACKEND_UNAVAILABLE,
    TIMEOUT,
    CRASH,
    INVALID_OUTPUT,
    ERROR,
)

_CUDA_FATAL_PATTERNS = (
    "illegal memory access",
    "an illegal instruction",
    "unspecified launch failure",
    "device-side assert",
    "misaligned address",
    "cublas_status_execution_failed",
    "cuda error: launch failure",
    "uncorrectable ecc error",
)
_OOM_PATTERNS = (
    "out of memory",
    "cuda_error_out_of_memory",
    "cublas_status_alloc_failed",
    # torch's CPU allocator and ENOMEM: "DefaultCPUAllocator: can't allocate memory".
    "can't allocate memory",
    "cannot allocate memory",
)
_UNSUPPORTED_PATTERNS = (
    "not supported",
    "unsupported",
    "no kernel image is available",
    "not implemented",
    "notimplemented",
    # Kernels that name where they run: "FP8 is only supported on SM100 ... for FA4 CuTe."
    "only supported on",
    "only supported for",
)
MAX_MESSAGE_CHARS = 2000
MAX_TRACEBACK_CHARS = 8000


def classify_exception(exc: BaseException) -> str:
    name = type(exc).__name__
    text = f"{name}: {exc}".lower()
    if any(p in text for p in _CUDA_FATAL_PATTERNS) or name == "AcceleratorError":
        return CUDA_FATAL
    if name in ("OutOfMemoryError", "MemoryError") or any(p in text for p in _OOM_PATTERNS):
        return OOM
    if isinstance(exc, ImportError):
        return BACKEND_UNAVAILABLE
    if isinstance(exc, NotImplementedError) or any(p in text for p in _UNSUPPORTED_PATTERNS):
        return UNSUPPORTED
    if isinstance(exc, TimeoutError):
        return TIMEOUT
    return ERROR


def poisons_context(classification: str) -> bool:
    return classification == CUDA_FATAL


# What says where or when a failure ran, never what failed: replaced before the numbers are.
_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|(?<![\w:])\d{1,2}:\d{2}:\d{2}(?:\.\d+)?(?![\w:])"
)
# A case key ("gemm:gemm_dtype=bfloat16,m=8,..."): the group counts cases, it is not one.
_CASE_KEY = re.compile(r"\b[a-z][a-z0-9_]*:[a-z_][a-z0-9_]*=[\w.=,|:+-]*")
# Worker names as the pool gives them (w0, w1, w0.1 after a replacement, w0.r2 after a recycle).
_WORKER = re.compile(r"\bw\d+(?:\.r?\d+)*\b")
# Device indexes: cuda:3, "GPU 3", device=3.
_DEVICE = re.compile(r"\b(cuda|gpu|device)([:= ]\s*|\s*#)\d+\b", re.IGNORECASE)
_TMPNAME = re.compile(r"\btmp[A-Za-z0-9_]{4,}\b")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(?:/[\w.+-]+){2,}")
_NUM = re.compile(r"(?<![A-Za-z0-9_.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![A-Za-z0-9_])")
_SPACE = re.compile(r"\s+")


def normalise_message(message: str) -> str:
    """Strip what varies between instances of one failure: where and when it ran (worker
    names, device indexes, case keys, timestamps, temporary names), addresses, paths and
    numbers (pids among them). The first line only, at most 200 characters."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    text = _TIME.sub("<time>", first)
    text = _CASE_KEY.sub("<case>", text)
    text = _WORKER.sub("<worker>", text)
    text = _DEVICE.sub(lambda m: f"{m.group(1)}:<i>", text)
    text = _HEX.sub("<hex>", text)
    text = _PATH.sub("<path>", text)
    text = _TMPNAME.sub("<tmp>", text)
    text = _NUM.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:200]


def group_key(
    op: str,
    classification: str,
    exception_type: str,
    message: str,
    dtype: str,
    signal: str | None = None,
) -> str:
    """Group identity: what failed and how (op, class, exception type or signal, normalised
    message, dtype family), never where or when it ran."""
    parts = (op, classification, exception_type, signal or "", normalise_message(message), dtype)
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:12]
    return f"{op}/{classification}/{exception_type}/{dtype}/{digest}"


def identity_key(record: FailureRecord) -> str:
    """The group key recomputed from a record's fields: what a comparison groups by, so that
    a stored key (an older collector's, or one a record was written with) is never trusted."""
    return group_key(
        record.op,
        record.classification,
        str(record.exception_type or ""),
        str(record.message or ""),
        str(record.dtype or ""),
        record.signal,
    )


@dataclass
class FailureRecord:
    task_id: str
    case_key: str
    op: str
    params: dict[str, Any]
    dtype: str
    classification: str
    group_key: str
    exception_type: str
    message: str
    traceback: str
    exit_code: int | None
    signal: str | None
    worker: str
    device: str
    run_index: int
    timestamp: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureRecord:
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]

    @classmethod
    def of(
        cls,
        identity: tuple[str, str, str, dict[str, Any], str],
        classification: str,
        exception_type: str,
        message: str,
        **rest: Any,
    ) -> FailureRecord:
        """A failure of the task `identity` (task_id, case_key, op, params, dtype), grouped by
        `group_key` and stamped now; `rest` is worker, device, run_index and, when known,
        traceback, exit_code and signal."""
        task_id, case_key, op, params, dtype = identity
        fields = {"traceback": "", "exit_code": None, "signal": None, **rest}
        return cls(
            task_id=task_id,
            case_key=case_key,
            op=op,
            params=params,
            dtype=dtype,
            classification=classification,
            group_key=group_key(
                op, classification, exception_type, message, dtype, fields["signal"]
            ),
            exception_type=exception_type,
            message=message,
            timestamp=now_iso(),
            **fields,
        )


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def record_from_exception(
    exc: BaseException,
    *,
    task_id: str,
    case_key: str,
    op: str,
    params: dict[str, Any],
    dtype: str,
    worker: str,
    device: str,
    run_index: int,
) -> FailureRecord:
    return FailureRecord.of(
        (task_id, case_key, op, params, dtype),
        classify_exception(exc),
        type(exc).__name__,
        str(exc)[:MAX_MESSAGE_CHARS],
        traceback="".join(traceback.format_exception(exc))[-MAX_TRACEBACK_CHARS:],
        worker=worker,
        device=device,
        run_index=run_index,
    )
