"""Fixtures for the real lab: every lab gets its own workdir and ibsim socket and is torn down."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabSpec
from console.fabric.models import Fabric
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401 (fixture)
from tests.needs import needs

FIXTURES = Path(__file__).parent / "fixtures"
NET_FILE = FIXTURES / "fat_tree_2x4x24.net"
#: Skipped without the lab tools; failed instead under CONSOLE_REQUIRE_LAB=1 (tests/needs.py).
requires_lab = needs("lab")


@pytest.fixture
def net_text() -> str:
    """The hand-written 2-level fat tree (2 spines, 4 leaves, 24 HCAs)."""
    return NET_FILE.read_text()


@pytest.fixture
def start_lab(tmp_path: Path, net_text: str) -> Iterator[Callable[..., Lab]]:
    """Factory: ``start_lab("a", routing_engine="ftree")``; every lab it starts is stopped."""
    labs: list[Lab] = []

    def start(name: str = "lab", **kw: object) -> Lab:
        spec = LabSpec(
            net_text=str(kw.pop("net_text", net_text)),
            workdir=tmp_path / name,
            sm_host=str(kw.pop("sm_host", "hca24")),
            socket_name=f"t-{uuid.uuid4().hex[:8]}-{name}",
            **kw,  # type: ignore[arg-type]
        )
        lab = Lab.start(spec)
        labs.append(lab)
        return lab

    yield start
    for lab in labs:
        lab.stop()


@pytest.fixture
def prod_fabric(su1_revision) -> Fabric:  # noqa: F811 (fixture)
    """A fabric of the 1-SU design reached through an agent (none connected): no lab."""
    return Fabric.objects.create(name="prod-ib", driver="agent", revision=su1_revision)
