"""REST API building blocks shared by every app, and the tenancy endpoints."""
