"""Fabric operations: lab fabric, OpenSM artefacts and infiniband-diags."""
