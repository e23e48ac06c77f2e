"""The evidence standard for raw samples, applied by the record reader.

A latency sample is a positive, finite time, recorded once per (case, run, sample index).
A case with any sample that is not (zero or negative, NaN, infinite, or a repeated index) is
excluded from the record as read: its samples and its perf row are dropped, and one anomaly
names the file and the case, so the comparison and the comment say what was excluded and
why. Nothing else of the record is touched. Column-wise, so a large record stays fast.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

EXCLUDED_CASE = "excluded_case"


def bad_sample_cases(samples: pa.Table) -> dict[str, list[str]]:
    """{case_key: [what is wrong, ...]} for the cases whose samples break the standard."""
    if samples.num_rows == 0:
        return {}
    problems: dict[str, list[str]] = defaultdict(list)
    keys = samples.column("case_key").combine_chunks()
    ms = pc.cast(samples.column("ms"), pa.float64()).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        checks = (
            ("NaN", np.isnan(ms)),
            ("infinite", np.isinf(ms)),
            ("zero or negative", np.isfinite(ms) & (ms <= 0)),
        )
    for what, mask in checks:
        if mask.any():
            bad = pc.value_counts(keys.filter(pa.array(mask))).to_pylist()
            for item in bad:
                problems[str(item["values"])].append(f"{item['counts']} {what}")
    counts = samples.group_by(["case_key", "run", "sample"]).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if repeated.num_rows:
        for row in repeated.to_pylist():
            problems[str(row["case_key"])].append(
                f"sample {row['sample']} of run {row['run']} recorded {row['count_all']} times"
            )
    return dict(problems)


def exclude_bad_sample_cases(
    perf: pa.Table, samples: pa.Table
) -> tuple[pa.Table, pa.Table, list[str]]:
    """Drop every case whose samples break the standard from both tables; one line each
    (the case and what is wrong) for the reader's `EXCLUDED_CASE` anomalies."""
    problems = bad_sample_cases(samples)
    if not problems:
        return perf, samples, []
    details = [
        f"{key}: {', '.join(problems[key][:4])} samples; the case is excluded"[:500]
        for key in sorted(problems)
    ]
    bad = pa.array(sorted(problems), type=pa.string())
    keep_samples = pc.invert(pc.is_in(samples.column("case_key"), value_set=bad))
    keep_perf = pc.invert(pc.is_in(perf.column("case_key"), value_set=bad))
    kept = perf.filter(pc.fill_null(keep_perf, True)), samples.filter(keep_samples)
    return (*kept, details)


# The hand-made campaign's rule: a sample more than 15% from its case's median (pooled over
# runs) is an outlier. Flagged and counted, never dropped: the estimate's trimming handles it.
OUTLIER_DISTANCE = 0.15
# A case is shown for its outliers when at least this share of its samples are outliers.
MANY_OUTLIERS_SHARE = 0.05


def count_outliers(runs: list[np.ndarray]) -> tuple[int, int]:
    """(outliers, samples) of one case's runs."""
    pooled = np.concatenate(runs) if runs else np.empty(0)
    if pooled.size == 0:
        return 0, 0
    median = float(np.median(pooled))
    if not median > 0:
        return 0, int(pooled.size)
    return int(np.count_nonzero(np.abs(pooled / median - 1.0) > OUTLIER_DISTANCE)), pooled.size


def many_outliers(outliers: int, samples: int) -> bool:
    return samples > 0 and outliers >= max(1, MANY_OUTLIERS_SHARE * samples)
