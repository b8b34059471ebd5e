"""Data nobody here wrote, kept in the repository so that a clone anywhere runs every test and
benchmark (``tests/data/``; each folder's ``SOURCES.md`` says where each file comes from, at which
commit, and under which licence): real ibnetdiscover dumps and node-name maps, Slurm and Kueue
topology examples, and the public GPU-cluster job traces (CC-BY 4.0)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
REALDATA = DATA / "realdata"
IBNETDISCOVER = REALDATA / "ibnetdiscover"
TRACES = DATA / "traces"
KALOS = TRACES / "kalos_jobs.csv"
