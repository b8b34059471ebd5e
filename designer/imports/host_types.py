"""What servers an imported fabric's hosts are: ``PATTERN NODE_TYPE`` lines.

ibnetdiscover sees HCAs, not GPUs: an imported host has 0 GPUs until the operator says what it
is. One line per group of hosts, a shell-style pattern on the host's name (as the dump or the
node-name map names it) and a node type of the catalogue, which carries the GPU count and model::

    # pattern        node type
    dgx-h100-*       DGX-H100
    gpu-b200-[0-9]*  DGX-B200

The first pattern that matches a host wins; a host that none matches keeps its imported type (no
GPUs: storage, login and management hosts). Linear in the lines; a line longer than
:data:`MAX_LINE` is refused (fnmatch's translation of a pattern is not bounded otherwise).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from designer.catalogue import Catalogue
from designer.errors import ParseError
from designer.graph import FabricGraph

MAX_LINE = 500


class HostTypesError(ParseError):
    """The host types (not the dump) could not be read; ``line`` is theirs."""


@dataclass(frozen=True)
class HostTypes:
    """Ordered (pattern, node type) rules."""

    rules: tuple[tuple[re.Pattern[str], str, str], ...] = ()

    def type_of(self, host: str) -> str | None:
        """The node type of the first rule that matches ``host`` (None: none does)."""
        for compiled, _, node_type in self.rules:
            if compiled.fullmatch(host):
                return node_type
        return None


def parse_host_types(text: str, catalogue: Catalogue) -> HostTypes:
    """Read the rules; a line that is not ``PATTERN NODE_TYPE`` or names a node type the catalogue
    lacks is refused with its number. A CSV of ``host,node_type`` rows (an inventory sheet; a
    header row naming ``host`` or ``name`` is skipped) gives one exact rule per host."""
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        if len(raw) > MAX_LINE:
            raise HostTypesError(f"a line of host types is at most {MAX_LINE} characters", line=number)
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        csv_row = "," in line
        fields = [f.strip().strip('"') for f in line.split(",")] if csv_row else line.split()
        if csv_row and fields[0].lower() in ("host", "name", "hostname", "node") and number == 1:
            continue
        if len(fields) != 2 or not all(fields):
            raise HostTypesError("expected 'PATTERN NODE_TYPE' or a 'host,node_type' row", line=number, text=raw)
        pattern, node_type = (fnmatch_escape(fields[0]), fields[1]) if csv_row else fields
        if node_type not in catalogue.nodes:
            known = ", ".join(sorted(n for n, t in catalogue.nodes.items() if t.gpus > 0)[:12])
            raise HostTypesError(f"no node type {node_type!r} in the catalogue (e.g. {known})", line=number)
        rules.append((re.compile(fnmatch.translate(pattern)), pattern, node_type))
    return HostTypes(tuple(rules))


def fnmatch_escape(name: str) -> str:
    """``name`` as a pattern that matches it alone (``[`` ``]`` ``*`` ``?`` quoted)."""
    return re.sub(r"([*?\[\]])", r"[\1]", name)


def apply_host_types(graph: FabricGraph, types: HostTypes) -> dict[str, str]:
    """Give the graph's hosts their node type (and its GPUs) by ``types``, in place: host →
    node type of the hosts it changed (a host no rule matches keeps its type)."""
    changed = {}
    for name, node in graph.nodes.items():
        node_type = types.type_of(name)
        if node_type is None or node_type == node.node_type:
            continue
        node.node_type = node_type
        node.gpus = graph.catalogue.nodes[node_type].gpus
        changed[name] = node_type
    return changed
