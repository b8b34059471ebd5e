"""Importers: ibnetdiscover output and the designer's own JSON."""

from designer.imports.ibnetdiscover import (
    Discovery,
    IbNode,
    IbPort,
    graph_from_ibnetdiscover,
    parse_ibnetdiscover,
)
from designer.serialize import graph_from_dict

__all__ = [
    "Discovery",
    "IbNode",
    "IbPort",
    "graph_from_dict",
    "graph_from_ibnetdiscover",
    "parse_ibnetdiscover",
]
