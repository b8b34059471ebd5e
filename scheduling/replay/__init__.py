"""Trace-replay simulator: real job traces through the real placement engine, in simulated time.

``replay(load_trace(path, "kalos"), rail_optimized(8), "topology")`` returns the metrics dict
(keys :data:`RESULT_KEYS`); the ``manage.py schedule replay`` command wraps exactly that.
"""

from .simulator import (
    RESULT_KEYS,
    JobRecord,
    ReplayOptions,
    ReplayResult,
    percentile,
    replay,
    simulate,
)
from .traces import (
    FORMATS,
    TraceFormatError,
    TraceJob,
    load_alibaba,
    load_generic,
    load_kalos,
    load_trace,
)

__all__ = [
    "FORMATS",
    "RESULT_KEYS",
    "JobRecord",
    "ReplayOptions",
    "ReplayResult",
    "TraceFormatError",
    "TraceJob",
    "load_alibaba",
    "load_generic",
    "load_kalos",
    "load_trace",
    "percentile",
    "replay",
    "simulate",
]
