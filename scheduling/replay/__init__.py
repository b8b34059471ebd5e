"""Trace-replay simulator: real job traces through the real placement engine, in simulated time.

``replay(load_trace(path, "kalos"), rail_optimized(8), "topology")`` returns the metrics dict
(keys :data:`RESULT_KEYS`); the ``manage.py schedule replay`` command wraps exactly that. With a power policy
(:func:`parse_power_policy`, :mod:`.power`) it adds :data:`POWER_KEYS` and :data:`WAIT_DELTA_KEYS`;
with sites (:func:`split_sites`, :func:`load_sites_file`, :mod:`.sites`) it adds ``locality``.
"""

from .power import POWER_KEYS, WAIT_DELTA_KEYS, PowerSettings, parse_power_policy, wait_deltas
from .results import RESULT_KEYS, JobRecord, ReplayResult
from .simulator import ReplayOptions, replay, simulate
from .sites import ReplaySites, load_sites_file, split_sites
from .stats import percentile
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
    "POWER_KEYS",
    "RESULT_KEYS",
    "WAIT_DELTA_KEYS",
    "PowerSettings",
    "JobRecord",
    "ReplayOptions",
    "ReplayResult",
    "ReplaySites",
    "TraceFormatError",
    "TraceJob",
    "load_alibaba",
    "load_generic",
    "load_kalos",
    "load_sites_file",
    "load_trace",
    "parse_power_policy",
    "percentile",
    "replay",
    "simulate",
    "split_sites",
    "wait_deltas",
]
