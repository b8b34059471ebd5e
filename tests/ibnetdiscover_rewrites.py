"""Rewrites of an exported ibnetdiscover dump into forms real fabrics show, shared by the import
tests, the compare tests and the import benchmark."""

from __future__ import annotations

import re


def with_aggregation_nodes(text: str, *, lid: int = 0, short_port_guids: bool = True) -> tuple[str, int]:
    """Give every switch the extra port and "Mellanox Technologies Aggregation Node" CA of SHARP;
    the dump and how many were added. ``short_port_guids`` writes the CA port GUID as ibnetdiscover
    abbreviates it (its last 13 hex digits)."""
    blocks, extra = [], []
    for i, block in enumerate(text.split("\n\n")):
        m = re.search(r'^Switch\t(\d+) "(S-[0-9a-f]+)"\t\t# "([^"]+)"', block, re.M)
        if m:
            port, an = int(m.group(1)) + 1, f"{0x0002C9BB00000000 + i:016x}"
            port_guid = an[-13:] if short_port_guids else an
            block = block.replace(f"Switch\t{m.group(1)} ", f"Switch\t{port} ", 1)
            block += (
                f'\n[{port}]\t"H-{an}"[1]({port_guid})\t\t# "Mellanox Technologies Aggregation Node" lid {lid} 4xHDR'
            )
            extra.append(
                f'caguid=0x{an}\nCa\t1 "H-{an}"\t\t# "Mellanox Technologies Aggregation Node"\n'
                f'[1]({port_guid})\t"{m.group(2)}"[{port}]\t\t# lid {lid} lmc 0 "{m.group(3)}" lid {lid} 4xHDR'
            )
        blocks.append(block)
    return "\n\n".join(blocks + extra) + "\n", len(extra)
