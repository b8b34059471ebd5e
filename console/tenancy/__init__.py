"""Tenants, memberships and roles, API tokens, the tenant-scoped base classes and the audit log."""
