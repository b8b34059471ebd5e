"""Tests of the pure-Python scheduling core: placement engine and trace replay (no Django)."""
