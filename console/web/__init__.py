"""Operator and tenant pages: Django templates hosting the Vite bundles."""
