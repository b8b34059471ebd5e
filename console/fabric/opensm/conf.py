"""``opensm.conf``: the options the console manages, their rendering, lint, and reload class.

OpenSM re-reads its options file on SIGHUP but applies only the options its option table marks
as updatable (``can_update`` in ``osm_subnet.c``); the rest, notably ``routing_engine`` and every
file path, keep their start-up value until OpenSM restarts. :func:`classify_changes` tells the
push pipeline which of the two a change needs, and names the options that force a restart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from console.fabric.opensm.lint import LintProblem, control_char_problems, long_line_problems
from console.fabric.opensm.qos import QosOptions, parse_qos_options, render_qos_options

ARTEFACT = "opensm.conf"
ROUTING_ENGINES = (
    "minhop",
    "updn",
    "dnup",
    "file",
    "ftree",
    "lash",
    "dor",
    "torus-2QoS",
    "nue",
    "dfsssp",
    "sssp",
    "chain",
)
# Options SIGHUP applies (can_update = 1 in OpenSM 3.3's option table).
RELOADABLE = frozenset(
    {
        "sweep_interval",
        "max_wire_smps",
        "max_wire_smps2",
        "max_smps_timeout",
        "sm_priority",
        "max_op_vls",
        "force_link_speed",
        "force_link_speed_ext",
        "reassign_lids",
        "ignore_other_sm",
        "subnet_timeout",
        "packet_life_time",
        "head_of_queue_lifetime",
        "leaf_head_of_queue_lifetime",
        "force_heavy_sweep",
        "sweep_on_trap",
        "connect_roots",
        "log_max_size",
        "log_flags",
        "force_log_flush",
        "accum_log_file",
        "no_partition_enforcement",
        "part_enforce",
        "qos",
        "port_shifting",
        "scatter_ports",
        "sm_inactive",
        "qos_max_vls",
        "qos_high_limit",
        "qos_vlarb_high",
        "qos_vlarb_low",
        "qos_sl2vl",
        # The management keys (can_update = 1; rotating m_key on hardware that already holds the
        # old one needs the guid2mkey file: docs/operations.md, "Isolation").
        "m_key",
        "sm_key",
        "sa_key",
        "m_key_lease_period",
        "m_key_protection_level",
        "m_key_lookup",
        "sminfo_polling_timeout",
        "polling_retry_number",
    }
)
# What OpenSM itself writes (``opensm -c``) for a string option that is not set.
NULL = "(null)"
# Options that only take effect when OpenSM starts (can_update = 0): engine and file paths.
RESTART_REQUIRED = frozenset(
    {
        "routing_engine",
        "partition_config_file",
        "qos_policy_file",
        "root_guid_file",
        "cn_guid_file",
        "io_guid_file",
        "log_file",
        "dump_files_dir",
        "lmc",
        "allow_both_pkeys",
        "use_ucast_cache",
        "max_reverse_hops",
        "guid",
        "daemon",
    }
)
_BOOL_OPTIONS = frozenset(
    {
        "qos",
        "force_log_flush",
        "reassign_lids",
        "sweep_on_trap",
        "connect_roots",
        "allow_both_pkeys",
    }
)
_PATH_OPTIONS = frozenset(
    {
        "partition_config_file",
        "qos_policy_file",
        "root_guid_file",
        "cn_guid_file",
        "io_guid_file",
        "log_file",
        "dump_files_dir",
    }
)
_KEY_RE = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class OpenSmConfig:
    """The ``opensm.conf`` options the console owns. ``extra`` carries anything else verbatim."""

    routing_engine: str = "ftree"
    partition_config_file: str | None = None
    qos_policy_file: str | None = None
    root_guid_file: str | None = None
    cn_guid_file: str | None = None
    qos: QosOptions | None = None
    force_log_flush: bool = True
    sweep_interval: int = 10
    extra: Mapping[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, str]:
        """All options as ``name -> value`` strings, in the order they are rendered."""
        opts: dict[str, str] = {"routing_engine": self.routing_engine}
        for name in ("partition_config_file", "qos_policy_file", "root_guid_file", "cn_guid_file"):
            value = getattr(self, name)
            if value is not None:
                opts[name] = value
        # Without force_log_flush OpenSM buffers its log, and the routing check reads the log.
        opts["force_log_flush"] = "TRUE" if self.force_log_flush else "FALSE"
        opts["sweep_interval"] = str(self.sweep_interval)
        opts["qos"] = "TRUE" if self.qos is not None else "FALSE"
        if self.qos is not None:
            opts.update(render_qos_options(self.qos))
        for key in sorted(self.extra):
            opts.setdefault(key, self.extra[key])
        return opts


def render_opensm_conf(config: OpenSmConfig) -> str:
    """Render the options file; raises ValueError for options that would not lint clean."""
    lines = ["# Written by the InfiniBand console; pushes set their options in place and keep every other line."]
    lines += [f"{k} {v}" for k, v in config.options().items()]
    text = "\n".join(lines) + "\n"
    problems = lint_opensm_conf(text)
    if problems:
        raise ValueError("; ".join(str(p) for p in problems))
    return text


def edit_opensm_conf(live: str, wanted: Mapping[str, str]) -> str:
    """``live`` with the options of ``wanted`` set: a line that sets one of them gets the new
    value in place (the rest of the line kept); options the file lacks are appended under one
    comment line; every other line (the operator's options, comments, blank lines, OpenSM's
    ``(null)``) stays exactly as written."""
    lines = live.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    done: set[str] = set()
    for i, raw in enumerate(lines):
        body = raw.split("#", 1)[0]
        parts = body.split(None, 1)
        if not parts or parts[0] not in wanted:
            continue
        key = parts[0]
        start = raw.index(key) + len(key)
        rest = raw[start:]
        value = rest.split("#", 1)[0].strip()
        at = rest.find(value) if value else 0
        tail = rest[at + len(value) :] if value else ""
        lines[i] = f"{raw[:start]}{rest[:at] if value else ' '}{wanted[key]}{tail}"
        done.add(key)
    missing = [k for k in wanted if k not in done]
    if missing:
        if lines and lines[-1].strip():
            lines.append("")
        lines.append(MANAGED_MARK)
        lines += [f"{k} {wanted[k]}" for k in missing]
    return "\n".join(lines) + "\n"


MANAGED_MARK = "# Set by the InfiniBand console (every other line is kept as written)"


def parse_opensm_conf(text: str) -> dict[str, str]:
    """``name -> value`` for every option line (later lines win, as in OpenSM)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        body = raw.split("#", 1)[0].strip()
        if body:
            key, _, value = body.partition(" ")
            out[key] = value.strip()
    return out


def lint_opensm_conf(text: str) -> list[LintProblem]:
    """Refuse malformed lines, repeated options and bad values of the options we manage."""
    problems = control_char_problems(ARTEFACT, text) + long_line_problems(ARTEFACT, text)
    seen: dict[str, int] = {}
    values: dict[str, str] = {}

    def bad(line: int | None, code: str, message: str) -> None:
        problems.append(LintProblem(ARTEFACT, line, code, message))

    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        key, _, value = body.partition(" ")
        value = value.strip()
        if not _KEY_RE.match(key) or not value:
            bad(lineno, "syntax", f"expected '<option> <value>', found {body!r}")
            continue
        if key in seen:
            bad(lineno, "duplicate-option", f"{key} already set on line {seen[key]}")
        seen[key] = lineno
        if value == NULL:
            continue  # unset, as OpenSM writes it
        values[key] = value
        if key in _BOOL_OPTIONS and value not in ("TRUE", "FALSE"):
            bad(lineno, "bad-value", f"{key} must be TRUE or FALSE, not {value!r}")
        if key == "routing_engine":
            for engine in value.split(","):
                if engine not in ROUTING_ENGINES:
                    bad(lineno, "bad-value", f"unknown routing engine {engine!r}")
        if key in _PATH_OPTIONS and not value.startswith("/"):
            bad(lineno, "bad-value", f"{key} must be an absolute path, not {value!r}")
        if key == "sweep_interval" and not value.isdigit():
            bad(lineno, "bad-value", f"sweep_interval must be a number of seconds, not {value!r}")
    if values.get("qos") == "TRUE":
        result = parse_qos_options(values)
        if isinstance(result, list):
            for error in result:
                bad(None, "bad-qos", error)
    return problems


@dataclass(frozen=True)
class ConfChange:
    """How a change of ``opensm.conf`` must be applied."""

    changed: tuple[str, ...]
    restart_required_by: tuple[str, ...]

    @property
    def needs_restart(self) -> bool:
        """True when SIGHUP is not enough."""
        return bool(self.restart_required_by)

    @property
    def action(self) -> str:
        """``none``, ``reload`` (SIGHUP) or ``restart``."""
        if not self.changed:
            return "none"
        return "restart" if self.needs_restart else "reload"


def classify_changes(old: str | Mapping[str, str], new: str | Mapping[str, str]) -> ConfChange:
    """Compare two option sets; unknown options are treated as needing a restart (safe side)."""
    before = parse_opensm_conf(old) if isinstance(old, str) else dict(old)
    after = parse_opensm_conf(new) if isinstance(new, str) else dict(new)
    changed = tuple(sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)))
    restart = tuple(k for k in changed if k not in RELOADABLE)
    return ConfChange(changed, restart)
