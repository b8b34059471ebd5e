"""Fabric designer: pure-Python domain core (catalogue, generators, validation, metrics,
exports, imports). Django models/API/CLI live beside it and call into these modules."""
