"""Scheduling services: every write is one typed function (permission, change, audit row).

``inventory`` (nodes, GPUs, HCAs, pools), ``quotas``, ``reservations`` (preview, reserve),
``lifecycle`` (extend, release, cancel, tick, and what the fabric verified, reached through
:mod:`scheduling.fabric_hooks`), ``topology`` (design graph → placement engine topology) and
``locks`` (every row lock, in one order).
"""
