"""The run record (docs/architecture.md): a self-describing directory readable without a GPU.

Writer: results are checkpointed line by line while the run goes on, so a crash loses at most
the case in flight; `finalize` turns the checkpoint into parquet tables, `failures.json` and,
last, `run.json` with every other file's sha256. Reader: validates on load and turns every
defect into a one-line error (unreadable record) or a flagged anomaly (suspect rows).
"""

from collector.record.checkpoint import Checkpoint, CheckpointState
from collector.record.files import sha256_file, write_failure, write_json
from collector.record.reader import Anomaly, RunRecord, read_record
from collector.record.schema import (
    CHECKPOINT,
    FAILURES_JSON,
    IDENTITY_COLUMNS,
    PERF_STAT_COLUMNS,
    RUN_JSON,
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    STATUSES,
    RunMeta,
    perf_file,
    perf_schema,
    samples_file,
)
from collector.record.writer import build_tables, finalize

__all__ = [
    "CHECKPOINT",
    "FAILURES_JSON",
    "IDENTITY_COLUMNS",
    "PERF_STAT_COLUMNS",
    "RUN_JSON",
    "SAMPLE_SCHEMA",
    "SCHEMA_VERSION",
    "STATUSES",
    "Anomaly",
    "Checkpoint",
    "CheckpointState",
    "RunMeta",
    "RunRecord",
    "build_tables",
    "finalize",
    "perf_file",
    "perf_schema",
    "read_record",
    "samples_file",
    "sha256_file",
    "write_failure",
    "write_json",
]
