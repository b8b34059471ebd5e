"""REST API of the fabric designer."""
