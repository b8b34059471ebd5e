"""Fabric operations tests: OpenSM artefacts, diags parsers, and the real OpenSM-on-ibsim lab."""
