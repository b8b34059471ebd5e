"""Scheduling services: every write is one typed function (permission, change, audit row).

``inventory`` (nodes, GPUs, HCAs, pools), ``quotas``, ``reservations`` (preview, reserve),
``lifecycle`` (extend, release, cancel, tick, fabric callbacks) and ``topology`` (design graph →
placement engine topology).
"""
