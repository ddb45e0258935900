"""Robust statistics for references and regression detection (no normality assumed)."""

import statistics

#: Scale factor making the MAD a consistent estimator of the standard deviation for normal data.
MAD_TO_SIGMA = 1.4826


def median(values):
    return statistics.median(values)


def mad(values):
    """Median absolute deviation from the median."""
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def robust_cv(values):
    """Robust coefficient of variation: 1.4826 * MAD / |median| (0 for fewer than 2 values)."""
    if len(values) < 2:
        return 0.0

    m = statistics.median(values)
    return MAD_TO_SIGMA * mad(values) / abs(m) if m else 0.0
