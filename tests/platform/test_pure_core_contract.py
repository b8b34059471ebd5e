"""The "pure cores" import contract covers every module of the designer's core.

The contract in ``pyproject.toml`` names the designer's pure modules one by one (the Django parts
live beside them in the same package), so a new core module would escape it unless it is listed.
This test fails when a designer module is in neither list: the pure core (source modules of the
contract) or the Django parts (the designer entries of its forbidden modules).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = "The pure cores import no Django and no app"


def _contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == PURE]
    return contract


def _covered(module: str, prefixes: list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_every_designer_module_is_pure_core_or_a_named_django_part():
    contract = _contract()
    pure = [m for m in contract["source_modules"] if m.startswith("designer")]
    django_parts = [m for m in contract["forbidden_modules"] if m.startswith("designer")]
    modules = []
    for path in (ROOT / "designer").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:  # the package itself only re-exports
            modules.append(".".join(parts))
    assert modules, "no designer module found"
    unlisted = sorted(m for m in modules if not _covered(m, pure) and not _covered(m, django_parts))
    assert not unlisted, f"add these to the pure-core contract (or its Django parts) in pyproject.toml: {unlisted}"
    both = sorted(m for m in modules if _covered(m, pure) and _covered(m, django_parts))
    assert not both, f"listed as pure core and as a Django part: {both}"
