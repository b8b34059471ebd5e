"""``manage.py design``: plan, save, export, import and question fabric designs.

    design plan [--topology …] [--gpus N | --nodes N] … --json [--save NAME]
    design export --design ID[/REV] --format FMT [--output FILE]
    design import --file FILE --name NAME [--node-name-map FILE] [--host-types FILE]
    design can-i --gpus N --switches M [--switch MODEL]
    design list

Impossible input exits non-zero; with --json the errors are in the printed object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Principal, Role
from designer import import_jobs, services
from designer.compare import comparison_table
from designer.exports import FORMATS, export
from designer.feasibility import can_i
from designer.models import Design, DesignRevision


def _cli_principal(username: str | None) -> tuple[Actor, Principal]:
    """The CLI acts as a named operator (``--as``) or, by default, as the console's system."""
    if username:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        return Actor.cli(user), Principal.of(user)
    return Actor.cli(), Principal(None, Role.OPERATOR, None)


class Command(BaseCommand):
    help = "Plan, save, export and import InfiniBand fabric designs."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        p = sub.add_parser("plan", help="plan a fabric (and optionally save it)")
        p.add_argument("--topology", choices=["fat-tree", "rail-optimized", "torus", "dragonfly-plus"], default=None)
        size = p.add_mutually_exclusive_group()
        size.add_argument("--gpus", type=int)
        size.add_argument("--nodes", type=int)
        p.add_argument(
            "--node-type",
            help="catalogue node type, any case (default DGX-H100; generic when only --gpus-per-node/--hcas-per-node)",
        )
        p.add_argument("--gpus-per-node", type=int, help="GPUs of a generic node (implies --node-type generic)")
        p.add_argument("--hcas-per-node", type=int, help="compute HCAs of a generic node (implies --node-type generic)")
        p.add_argument("--switch", help="catalogue switch model, any case (default QM9700)")
        p.add_argument("--oversubscription", metavar="D:U")
        p.add_argument("--levels", choices=["auto", "1", "2", "3"])
        p.add_argument("--manager-slot", action="store_true", default=None)
        p.add_argument("--dims", metavar="AxBxC")
        p.add_argument("--hosts-per-switch", type=int)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--save", metavar="NAME", help="save as a design with this name")
        p.add_argument("--as", dest="as_user", metavar="USERNAME", help="act as this operator")

        e = sub.add_parser("export", help="export a revision")
        e.add_argument("--design", required=True, metavar="ID[/REV]")
        e.add_argument("--format", required=True, choices=sorted(FORMATS))
        e.add_argument("--output", metavar="FILE", help="write here instead of stdout")

        i = sub.add_parser("import", help="import ibnetdiscover output as a design")
        i.add_argument("--file", required=True)
        i.add_argument("--name", required=True)
        i.add_argument("--node-name-map", metavar="FILE", help="GUID → name map (rdma-core node-name-map format)")
        i.add_argument(
            "--host-types", metavar="FILE", help="'PATTERN NODE_TYPE' lines: which hosts are which servers (GPUs)"
        )
        i.add_argument("--json", action="store_true")
        i.add_argument("--as", dest="as_user", metavar="USERNAME")

        t = sub.add_parser("node-types", help="say which hosts are which servers (a new revision, with GPUs)")
        t.add_argument("--design", required=True, metavar="ID|NAME")
        t.add_argument("--file", required=True, help="'PATTERN NODE_TYPE' lines or 'host,node_type' CSV rows")
        t.add_argument("--json", action="store_true")
        t.add_argument("--as", dest="as_user", metavar="USERNAME")

        c = sub.add_parser("can-i", help='"can I do X with Y?", answered with the arithmetic')
        c_size = c.add_mutually_exclusive_group(required=True)
        c_size.add_argument("--gpus", type=int)
        c_size.add_argument("--nodes", type=int)
        c.add_argument("--switches", type=int, required=True)
        c.add_argument("--switch", dest="switch_model", default="QM9700")
        c.add_argument("--node-type", default="DGX-H100")
        c.add_argument("--oversubscription", default="1:1")
        c.add_argument("--json", action="store_true")

        sub.add_parser("list", help="list saved designs")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"_{action.replace('-', '_')}")(**options)

    # --- plan -------------------------------------------------------------------------------
    def _plan(self, *, json: bool, save: str | None, as_user: str | None, **options: Any) -> None:
        keys = [
            "topology",
            "gpus",
            "nodes",
            "node_type",
            "gpus_per_node",
            "hcas_per_node",
            "switch",
            "oversubscription",
            "levels",
            "manager_slot",
            "dims",
            "hosts_per_switch",
        ]
        plan_options = {k: options[k] for k in keys if options.get(k) is not None}
        result = services.preview(plan_options)
        summary = result.summary()
        if not summary["errors"] and save:
            actor, principal = _cli_principal(as_user)
            try:
                design, revision = services.create_design(actor, principal, name=save, options=plan_options)
            except ConsoleError as exc:
                summary["errors"].append(exc.detail)
            else:
                summary["design_id"], summary["revision"] = design.pk, revision.number
        self._emit(summary, json, human=lambda: self._human_plan(summary))
        if summary["errors"]:
            sys.exit(2)

    def _human_plan(self, s: dict) -> str:
        lines = [f"{s['topology']}: {s['gpus']:,} GPUs on {s['nodes']:,} nodes ({s['endpoints']:,} endpoints)"]
        lines.append("switches: " + ", ".join(f"{k} {v}" for k, v in s["switches"].items()))
        lines.append("cables:   " + ", ".join(f"{k} {v}" for k, v in s["cables"].items()))
        lines.append(
            f"transceivers {s['transceivers']}, oversubscription {s['oversubscription']}"
            f", bisection {s['bisection_bandwidth_gbps']:,} Gb/s, diameter "
            f"{s['diameter_switch_hops']} switch hops"
        )
        lines.append(f"power {s['power_w']:,.0f} W, cost {s['cost']:,.0f}")
        lines += [f"warning: {w}" for w in s["warnings"]]
        lines += [f"error: {e}" for e in s["errors"]]
        if "design_id" in s:
            lines.append(f"saved as design {s['design_id']} revision {s['revision']}")
        return "\n".join(lines)

    # --- export / import / can-i / list -------------------------------------------------------
    def _export(self, *, design: str, format: str, output: str | None, **_: Any) -> None:
        revision = _find_revision(design)
        graph = services.revision_graph(revision)
        graph.meta["name"] = revision.design.name
        content = export(graph, format)[0]
        if output:
            Path(output).write_text(content)
            self.stderr.write(f"wrote {output} ({len(content):,} bytes)")
        else:
            self.stdout.write(content, ending="" if content.endswith("\n") else "\n")

    def _import(
        self,
        *,
        file: str,
        name: str,
        json: bool,
        as_user: str | None,
        node_name_map: str | None = None,
        host_types: str | None = None,
        **_: Any,
    ) -> None:
        texts = []
        for path in (file, node_name_map, host_types):
            try:
                texts.append(Path(path).read_text(encoding="utf-8-sig", errors="replace") if path else None)
            except OSError as exc:
                raise CommandError(f"cannot read {path}: {exc}") from None
        actor, principal = _cli_principal(as_user)
        # a large dump says its phases on stderr (stdout stays the result alone)
        large = import_jobs.needs_job(*texts)
        try:
            design, revision = services.import_ibnetdiscover(
                actor,
                principal,
                name=name,
                text=texts[0] or "",
                node_name_map=texts[1],
                host_types=texts[2],
                progress=(lambda step, percent: self.stderr.write(f"{percent:3d} % {step}")) if large else None,
            )
        except ConsoleError as exc:
            detail = exc.detail
            self._emit({"errors": [detail]}, json, human=lambda: f"error: {detail}")
            sys.exit(2)
        body = {"design_id": design.pk, "revision": revision.number, **revision.summary}
        self._emit(body, json, human=lambda: _human_import(body))

    def _node_types(self, *, design: str, file: str, json: bool, as_user: str | None, **_: Any) -> None:
        target = _find_revision(design).design
        try:
            text = Path(file).read_text(encoding="utf-8-sig", errors="replace")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        actor, principal = _cli_principal(as_user)
        try:
            revision = services.assign_node_types(actor, principal, target, text)
        except ConsoleError as exc:
            detail = exc.detail
            self._emit({"errors": [detail]}, json, human=lambda: f"error: {detail}")
            sys.exit(2)
        body = {"design_id": target.pk, "revision": revision.number, "message": revision.message}
        body["gpus"] = revision.summary.get("gpus", 0)
        self._emit(body, json, human=lambda: f"revision {body['revision']}: {body['message']} ({body['gpus']:,} GPUs)")

    def _can_i(self, *, json: bool, **options: Any) -> None:
        keys = ("gpus", "nodes", "switches", "switch_model", "node_type", "oversubscription")
        answer = can_i(
            catalogue=services.load_catalogue(),
            **{k: options[k] for k in keys if options.get(k) is not None},
        )
        body = answer.as_dict()
        self._emit(
            body,
            json,
            human=lambda: "\n".join(
                [body["question"], *body.get("steps", []), *(f"- {a}" for a in body.get("alternatives", []))]
            ),
        )
        if not body.get("feasible"):
            sys.exit(1)

    def _list(self, **_: Any) -> None:
        rows = [
            {"id": d.pk, "name": d.name, "topology": d.topology, "revision": d.latest_revision}
            for d in Design.objects.all()
        ]
        self.stdout.write(comparison_table(rows) if rows else "no designs")

    def _emit(self, body: dict, as_json: bool, *, human: Callable[[], str]) -> None:
        self.stdout.write(json.dumps(body, default=str) if as_json else human())


def _human_import(body: dict[str, Any]) -> str:
    """The import in a few lines: what came in, what was inferred, one line per warning kind."""
    info = body.get("import", {})
    tiers = ", ".join(f"{k} {v}" for k, v in info.get("tiers", {}).items())
    lines = [
        f"imported as design {body['design_id']} r{body['revision']}",
        f"{info.get('switches', 0)} switches ({tiers}), {info.get('hosts', 0)} hosts with {info.get('hcas', 0)} HCAs, "
        f"{info.get('links', 0)} links, {info.get('levels', 0)} level(s)",
    ]
    if info.get("aggregation_nodes"):
        lines.append(f"{info['aggregation_nodes']} SHARP Aggregation Nodes (not hosts)")
    for chassis in info.get("chassis", []):
        lines.append(f"director {chassis['name']} ({chassis['model']}): {chassis['asics']} ASICs")
    if info.get("rails"):
        lines.append(f"rail-optimised: {info['rails']} rails, {info.get('scalable_units', 0)} scalable units")
    if info.get("oversubscription"):
        lines.append("oversubscription " + ", ".join(f"{k} {v}" for k, v in info["oversubscription"].items()))
    if info.get("rates"):
        lines.append("links " + ", ".join(f"{k} {v}" for k, v in info["rates"].items()))
    lines += [f"warning: {w}" for w in body.get("warnings", [])]
    lines += [f"error: {e}" for e in body.get("errors", [])]
    return "\n".join(lines)


def _find_revision(spec: str) -> DesignRevision:
    design_part, _, rev_part = spec.partition("/")
    try:
        design = (
            Design.objects.get(pk=int(design_part)) if design_part.isdigit() else Design.objects.get(name=design_part)
        )
    except Design.DoesNotExist:
        raise CommandError(f"no design {design_part!r}") from None
    number = int(rev_part) if rev_part.isdigit() else design.latest_revision
    revision = DesignRevision.objects.filter(design=design, number=number).first()
    if revision is None:
        raise CommandError(f"design {design.name!r} has no revision {number}")
    return revision
