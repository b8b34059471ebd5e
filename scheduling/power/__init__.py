"""Power management's domain logic (plain Python: no Django, no ORM).

:mod:`.policy` decides which idle nodes to power off and which to power on ahead of demand;
:mod:`.energy` turns per-node power-state histories into kWh, the always-on baseline and the
fraction saved. The console's power app and the replay simulator both build on these.
"""
