"""Live telemetry: counters → per-link rates and errors, events and alarms, the lab traffic model."""
