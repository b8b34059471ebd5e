"""Importers: ibnetdiscover output (with inference and findings) and the designer's own JSON."""

from designer.imports.ibnetdiscover import (
    Discovery,
    FabricImport,
    IbNode,
    IbPort,
    graph_from_ibnetdiscover,
    import_fabric,
    parse_ibnetdiscover,
)
from designer.imports.summary import summarise
from designer.serialize import graph_from_dict

__all__ = [
    "Discovery",
    "FabricImport",
    "IbNode",
    "IbPort",
    "graph_from_dict",
    "graph_from_ibnetdiscover",
    "import_fabric",
    "parse_ibnetdiscover",
    "summarise",
]
