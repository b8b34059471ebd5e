"""REST API of fabric operations."""
