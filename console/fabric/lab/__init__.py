"""The lab fabric: ibsim plus a real OpenSM under umad2sim, managed as one unit."""
