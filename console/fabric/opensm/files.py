"""Atomic swap of OpenSM artefacts into their directory, with a last-known-good copy to roll back to.

OpenSM may re-read a file at any moment (a trap triggers a heavy sweep, not just our SIGHUP), so
a file must never be seen half-written: each artefact is written to a temporary file in the
same directory, fsynced, and ``os.replace``-d over the live name; the directory is fsynced too.
A set of artefacts is linted as a whole first and nothing is written if any one fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from console.fabric.opensm.conf import lint_opensm_conf
from console.fabric.opensm.lint import ArtefactRejected, LintProblem, lint_guid_file
from console.fabric.opensm.partitions_file import lint_file
from console.fabric.opensm.qos import lint_qos_policy

LKG_DIR = ".last-known-good"
Linter = Callable[[str], list[LintProblem]]


def _guid_linter(name: str) -> Linter:
    return lambda text: lint_guid_file(text, artefact=name)


LINTERS: dict[str, Linter] = {
    "partitions": lint_file,
    "qos-policy": lint_qos_policy,
    "opensm-conf": lint_opensm_conf,
    "root-guids": _guid_linter("root_guids.conf"),
    "cn-guids": _guid_linter("cn_guids.conf"),
}


# The file names the console writes, and which linter guards each.
KIND_BY_FILENAME: dict[str, str] = {
    "partitions.conf": "partitions",
    "qos-policy.conf": "qos-policy",
    "opensm.conf": "opensm-conf",
    "root_guids.conf": "root-guids",
    "cn_guids.conf": "cn-guids",
}


@dataclass(frozen=True)
class Artefact:
    """One file OpenSM reads: its kind (selects the linter), file name and full text."""

    kind: str
    filename: str
    text: str

    def lint(self) -> list[LintProblem]:
        """Problems of this artefact; unknown kinds are refused rather than written unchecked."""
        linter = LINTERS.get(self.kind)
        if linter is None:
            return [LintProblem(self.filename, None, "unknown-kind", f"no linter for {self.kind}")]
        if "/" in self.filename or self.filename.startswith("."):
            return [LintProblem(self.filename, None, "bad-filename", "plain file names only")]
        return linter(self.text)


@dataclass(frozen=True)
class SwapResult:
    """What a swap changed: file names replaced, and their previous text (None = did not exist)."""

    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    previous: dict[str, str | None]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see either the old or the new file, never a mix."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


class ArtefactStore:
    """The directory OpenSM reads its files from, plus its last-known-good (LKG) copies."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.lkg_directory = self.directory / LKG_DIR
        self.lkg_directory.mkdir(exist_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # Serialises writers from different processes (a CLI and a worker) on one host.
        with open(self.directory / ".lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def path(self, filename: str) -> Path:
        """Live path of an artefact."""
        return self.directory / filename

    def read(self, filename: str) -> str | None:
        """Live text of an artefact, or None when absent."""
        try:
            return self.path(filename).read_text(encoding="ascii")
        except FileNotFoundError:
            return None

    def read_lkg(self, filename: str) -> str | None:
        """Last-known-good text of an artefact, or None when none was recorded."""
        try:
            return (self.lkg_directory / filename).read_text(encoding="ascii")
        except FileNotFoundError:
            return None

    @staticmethod
    def lint(artefacts: Iterable[Artefact]) -> list[LintProblem]:
        """Problems of a whole set of artefacts."""
        return [p for a in artefacts for p in a.lint()]

    def swap(self, artefacts: Iterable[Artefact]) -> SwapResult:
        """Lint all, then atomically replace every artefact whose text changed.

        Raises :class:`ArtefactRejected` (and writes nothing) if any artefact fails lint.
        """
        artefacts = list(artefacts)
        problems = self.lint(artefacts)
        if problems:
            raise ArtefactRejected(problems)
        changed, unchanged, previous = [], [], {}
        with self._locked():
            for a in artefacts:
                old = self.read(a.filename)
                if old == a.text:
                    unchanged.append(a.filename)
                    continue
                previous[a.filename] = old
                atomic_write(self.path(a.filename), a.text)
                changed.append(a.filename)
        return SwapResult(tuple(changed), tuple(unchanged), previous)

    def mark_good(self, filenames: Iterable[str] | None = None) -> None:
        """Record the live artefacts as last-known-good (after they were verified on the wire)."""
        with self._locked():
            names = list(filenames) if filenames is not None else self._live_names()
            for name in names:
                text = self.read(name)
                if text is not None:
                    atomic_write(self.lkg_directory / name, text)

    def rollback(self) -> tuple[str, ...]:
        """Restore every last-known-good artefact whose live text differs; returns their names.

        LKG copies are re-linted, so even a tampered LKG directory cannot feed OpenSM a bad file.
        """
        with self._locked():
            candidates = [
                Artefact(KIND_BY_FILENAME.get(p.name, "unknown"), p.name, p.read_text("ascii"))
                for p in sorted(self.lkg_directory.iterdir())
                if not p.name.startswith(".")
            ]
            problems = self.lint(candidates)
            if problems:
                raise ArtefactRejected(problems)
            restored = []
            for a in candidates:
                if self.read(a.filename) != a.text:
                    atomic_write(self.path(a.filename), a.text)
                    restored.append(a.filename)
            return tuple(restored)

    def has_lkg(self) -> bool:
        """True once some artefact set has been marked good."""
        return any(not p.name.startswith(".") for p in self.lkg_directory.iterdir())

    def _live_names(self) -> list[str]:
        return sorted(p.name for p in self.directory.iterdir() if p.is_file() and not p.name.startswith("."))
