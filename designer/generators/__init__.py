"""Generators: one code path from PlanOptions to a FabricGraph (preview, CLI, API, save)."""

from __future__ import annotations

from collections.abc import Callable

from designer.catalogue import Catalogue
from designer.graph import FabricGraph
from designer.options import ResolvedOptions

Generator = Callable[[ResolvedOptions, Catalogue], FabricGraph]


def _registry() -> dict[str, Generator]:
    from designer.generators.dragonfly import build_dragonfly_plus
    from designer.generators.fattree import build_fat_tree, build_rail_optimized
    from designer.generators.torus import build_torus

    return {
        "fat-tree": build_fat_tree,
        "rail-optimized": build_rail_optimized,
        "torus": build_torus,
        "dragonfly-plus": build_dragonfly_plus,
    }


def generate(ro: ResolvedOptions, catalogue: Catalogue) -> FabricGraph:
    """Build the fabric graph for resolved options (raises PlanError when impossible)."""
    return _registry()[ro.topology](ro, catalogue)
