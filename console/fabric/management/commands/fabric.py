"""``manage.py fabric``: push a fabric's desired state, set partitions, discover and compare.

    fabric apply --fabric F [--dry-run] [--wait] --json
    fabric partition set --fabric F --name NAME --pkey 0xHHHH --member GUID[=full|limited] … [--wait] --json
    fabric partition delete --fabric F --name NAME [--wait] --json
    fabric port set --fabric F --switch S --port N [--enable|--disable] [--width 1X|4X|8X|12X|2X]
                    [--speed 2.5|5.0|10.0] [--reason TEXT] [--wait] --json
    fabric port clear --fabric F --switch S --port N [--wait] --json
    fabric discover --fabric F --json
    fabric compare --fabric F [--no-discover] --json
    fabric validate --fabric F [--json|--csv]   run the fabric validation suite now
    fabric agent create --fabric F --name smhost1 [--json]   (the token is printed once)
    fabric agent list --fabric F [--json]
    fabric agent revoke --fabric F --name smhost1
    fabric review --fabric F [--json]          after a restore: what resuming adds and removes on the wire
    fabric resume --fabric F --confirm [--json]   after a restore: push the restored state again

F is a fabric id or name. A thin layer over the same change-request services as the API: with
``--wait`` the command returns when the change is verified or failed, prints that outcome and
exits non-zero unless it was applied. In embedded mode (no separate worker) ``--wait`` runs the
push in this process; the database lease makes that as safe as a worker doing it.

``compare`` discovers afresh when the stored discovery is older than FABRIC_COMPARE_MAX_AGE_S or
OpenSM swept since; ``--no-discover`` compares the stored one as it is. Both print which
discovery they compared, when it ran and how old it is.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.fabric import changes, hooks, paused
from console.fabric.agents import services as agent_services
from console.fabric.agents.drill import failover_drill
from console.fabric.api.serializers import ChangeSerializer
from console.fabric.changes.pipeline import apply_change
from console.fabric.discovery.services import compare, discover
from console.fabric.models import ChangeRequest, Fabric, FabricAgent, PortAdminState
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Principal, Role
from designer.imports.health import as_csv

SUCCESS = {ChangeRequest.Status.APPLIED, ChangeRequest.Status.UNCHANGED, ChangeRequest.Status.PREVIEWED}


def _fabric(ref: str) -> Fabric:
    fabric = Fabric.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
    fabric = fabric or Fabric.objects.filter(name=ref).first()
    if fabric is None:
        raise CommandError(f"no fabric {ref!r}")
    return fabric


class Command(BaseCommand):
    help = "Push fabric changes, set partitions and switch ports, discover and compare fabrics."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--as", dest="as_user", help="act as this operator (default: CLI)")
        sub = parser.add_subparsers(dest="action", required=True)

        def common(p: CommandParser, wait: bool = True) -> None:
            p.add_argument("--fabric", required=True, help="fabric id or name")
            p.add_argument("--json", action="store_true", help="print JSON")
            if wait:
                p.add_argument("--wait", action="store_true", help="until verified or failed")
                p.add_argument("--timeout", type=float, default=600.0)

        common(p := sub.add_parser("apply", help="push the desired state"))
        p.add_argument("--dry-run", action="store_true", help="only show the diff")
        p.add_argument("--reason", default="")
        part = sub.add_parser("partition", help="set or delete a partition, then push")
        psub = part.add_subparsers(dest="partition_action", required=True)
        common(p := psub.add_parser("set"))
        p.add_argument("--name", required=True)
        p.add_argument("--pkey", required=True, help="0x0001-0x7ffe")
        p.add_argument("--member", action="append", default=[], metavar="GUID[=full|limited]")
        p.add_argument("--sl", type=int, default=0)
        p.add_argument("--ipoib", action="store_true")
        common(p := psub.add_parser("delete"))
        p.add_argument("--name", required=True)
        port = sub.add_parser("port", help="administer a switch port, then push")
        portsub = port.add_subparsers(dest="port_action", required=True)
        common(p := portsub.add_parser("set"))
        p.add_argument("--switch", required=True, help="switch name in the fabric's design")
        p.add_argument("--port", required=True, type=int)
        state = p.add_mutually_exclusive_group()
        state.add_argument(
            "--enable",
            dest="enabled",
            action="store_const",
            const=True,
            help="port up (default for a port not administered yet)",
        )
        state.add_argument("--disable", dest="enabled", action="store_const", const=False)
        p.add_argument("--width", help="1X, 4X, 8X, 12X or 2X ('none': leave the port's own)")
        p.add_argument("--speed", help="2.5, 5.0 or 10.0 Gbps ('none': leave the port's own)")
        p.add_argument("--reason", default="")
        common(p := portsub.add_parser("clear", help="stop administering the port"))
        p.add_argument("--switch", required=True)
        p.add_argument("--port", required=True, type=int)
        agent = sub.add_parser("agent", help="the agents of a fabric's subnet-manager hosts")
        asub = agent.add_subparsers(dest="agent_action", required=True)
        for verb, what in (("create", "a token for a new agent"), ("revoke", "stop an agent"), ("list", "the agents")):
            common(p := asub.add_parser(verb, help=what), wait=False)
            if verb != "list":
                p.add_argument("--name", required=True, help="the agent's name, e.g. the SM host's (smhost1)")
        common(
            p := sub.add_parser(
                "failover-drill",
                help="kill the master OpenSM of a lab fabric and measure the standby's takeover "
                "(any other fabric, or --dry-run: check the standbys' readiness, touching nothing)",
            ),
            wait=False,
        )
        p.add_argument("--dry-run", action="store_true", help="only check the standbys' readiness")
        p.add_argument("--timeout", type=float, default=60.0, help="seconds the takeover may take")
        common(
            sub.add_parser("review", help="after a restore: what resuming would add and remove on the wire"),
            wait=False,
        )
        common(p := sub.add_parser("resume", help="after a restore: push the restored state again"), wait=False)
        p.add_argument("--confirm", action="store_true", help="having reviewed what it adds and removes")
        common(p := sub.add_parser("validate", help="discover now and run the fabric validation tests"), wait=False)
        p.add_argument("--csv", action="store_true", help="one row per offender")
        common(sub.add_parser("discover", help="ibnetdiscover and store the graph"), wait=False)
        common(p := sub.add_parser("compare", help="discovered vs designed"), wait=False)
        p.add_argument(
            "--no-discover",
            dest="discover",
            action="store_false",
            help="compare the stored discovery however old (default: discover afresh when it is stale)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        actor, principal = self._who(opts.get("as_user"))
        fabric = _fabric(opts["fabric"])
        try:
            if opts["action"] == "agent":
                return self._agent(actor, principal, fabric, opts)
            if opts["action"] == "failover-drill":
                return self._drill(actor, principal, fabric, opts)
            if opts["action"] == "review":
                return self._review(opts, paused.review(fabric))
            if opts["action"] == "resume":
                return self._review(opts, paused.resume(actor, principal, fabric, confirm=opts["confirm"]), True)
            if opts["action"] == "validate":
                return self._validate(opts, hooks.validate(fabric.pk, actor=actor))
            if opts["action"] == "discover":
                run = discover(fabric, actor=actor, progress=lambda step, _: self.stderr.write(f"… {step}"))
                body = {"duration_s": run.duration_s, "summary": run.summary}
                return self._print(opts, {**body, **compare(fabric, run, just_discovered=True)})
            if opts["action"] == "compare":
                return self._print(opts, compare(fabric, refresh=opts["discover"], actor=actor))
            if opts["action"] == "partition":
                if opts["partition_action"] == "set":
                    changes.set_partition(
                        actor,
                        principal,
                        fabric,
                        name=opts["name"],
                        pkey=opts["pkey"],
                        members=opts["member"],
                        sl=opts["sl"],
                        ipoib=opts["ipoib"],
                    )
                else:
                    changes.delete_partition(actor, principal, fabric, name=opts["name"])
            if opts["action"] == "port":
                self._port(actor, principal, fabric, opts)
            change = changes.request_change(
                actor,
                principal,
                fabric,
                dry_run=bool(opts.get("dry_run")),
                reason=opts.get("reason") or f"cli: {opts['action']}",
            )
        except ConsoleError as exc:
            self._print(opts, exc.as_dict())
            raise CommandError(exc.detail) from None
        if opts.get("wait") and not change.is_terminal:
            change = self._wait(change, opts["timeout"])
        body = ChangeSerializer(change).data
        body = {"change": body, "status": change.status, "ok": change.status in SUCCESS}
        self._print(opts, body)
        if opts.get("wait") and change.status not in SUCCESS:
            raise CommandError(f"change {change.pk} {change.status}: {change.error}")

    def _port(self, actor: Actor, principal: Principal, fabric: Fabric, opts: dict) -> None:
        """``port set``: options not given keep the port's current wanted state (a new port is
        enabled, width and speed left alone); ``port clear`` stops administering it."""
        if opts["port_action"] == "clear":
            changes.clear_port_admin(actor, principal, fabric, switch=opts["switch"], port=opts["port"])
            return
        row = PortAdminState.objects.filter(fabric=fabric, switch=opts["switch"], port=opts["port"]).first()
        keep: dict[str, Any] = {"enabled": row.enabled, "width": row.width, "speed": row.speed} if row else {}
        changes.set_port_admin(
            actor,
            principal,
            fabric,
            switch=opts["switch"],
            port=opts["port"],
            enabled=opts["enabled"] if opts["enabled"] is not None else keep.get("enabled", True),
            width=opts["width"] if opts["width"] is not None else keep.get("width"),
            speed=opts["speed"] if opts["speed"] is not None else keep.get("speed"),
            reason=opts["reason"] or (row.reason if row else ""),
        )

    def _agent(self, actor: Actor, principal: Principal, fabric: Fabric, opts: dict[str, Any]) -> None:
        """Create (the token printed once), list or revoke the agents of the fabric's SM hosts."""
        verb = opts["agent_action"]
        if verb == "create":
            made = agent_services.create_agent(actor, principal, fabric, name=opts["name"])
            body = {"id": made.agent.pk, "name": made.agent.name, "fabric": fabric.name, "token": made.token}
            if opts.get("json"):
                return self._print(opts, body)
            self.stdout.write(
                f"agent {made.agent.name} of {fabric.name}: its token (shown once; give it to the agent as "
                f"IBCONSOLE_AGENT_TOKEN or --token-file):\n{made.token}"
            )
            return None
        if verb == "revoke":
            agent = FabricAgent.objects.filter(fabric=fabric, name=opts["name"]).first()
            if agent is None:
                raise CommandError(f"no agent {opts['name']!r} on fabric {fabric.name}")
            agent_services.revoke_agent(actor, principal, agent)
            self.stdout.write(f"agent {agent.name} of {fabric.name} revoked")
            return None
        rows = agent_services.agents_json(fabric)
        if opts.get("json"):
            return self._print(opts, {"agents": rows})
        self.stdout.write("\n".join(_agent_row(r) for r in rows) or f"no agent on {fabric.name}")
        return None

    def _drill(self, actor: Actor, principal: Principal, fabric: Fabric, opts: dict[str, Any]) -> None:
        report = failover_drill(actor, principal, fabric, dry_run=opts["dry_run"], timeout=opts["timeout"])
        if opts.get("json"):
            return self._print(opts, report)
        lines = [f"failover drill of {fabric.name} ({report['mode']}): master {report['master']}"]
        for s in report["standbys"]:
            lines.append(
                f"  standby {s['name']}: {'ready' if s['ready'] else 'NOT READY: ' + '; '.join(s['problems'])}"
            )
        if report["mode"] == "lab":
            lines.append(
                f"  killed {report['master']}: {report['new_master']} left STANDBY after {report['detection_s']} s, "
                f"MASTER after {report['takeover_s']} s"
            )
            diffs = report["differences"]
            lines.append(f"  {report['ports_checked']} member ports: {len(diffs)} P_Key/QoS table differences")
            lines += [f"    {d}" for d in diffs]
            lines.append(f"  {report['master']} restarted: {report['old_master']}")
        self.stdout.write("\n".join(lines))
        return None

    def _who(self, username: str | None) -> tuple[Actor, Principal]:
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user {username!r}")
            return Actor.cli(user), Principal.of(user)
        return Actor.cli(), Principal(None, Role.OPERATOR, None)

    def _wait(self, change: ChangeRequest, timeout: float) -> ChangeRequest:
        if settings.EMBEDDED and change.status == ChangeRequest.Status.QUEUED:
            apply_change(change.pk, worker_id=f"cli/{socket.gethostname()}/{os.getpid()}")
        deadline = time.monotonic() + timeout
        while True:
            change.refresh_from_db()
            if change.is_terminal or change.status == ChangeRequest.Status.PENDING_APPROVAL:
                return change
            if time.monotonic() > deadline:
                raise CommandError(f"change {change.pk} still {change.status} after {timeout}s")
            time.sleep(0.2)

    def _validate(self, opts: dict[str, Any], report: dict[str, Any]) -> None:
        """The validation suite's run; exits non-zero when a test fails or the run did."""
        if report["state"] != "done":
            raise CommandError(f"validation {report['id']} {report['state']}: {report['error']}")
        verdicts = report["verdicts"]
        if opts.get("json"):
            body = {k: report[k] for k in ("id", "ok", "failed", "duration_s", "discovery_id", "url")}
            self._print(opts, {**body, "tests": verdicts})
        elif opts.get("csv"):
            self.stdout.write(as_csv(verdicts), ending="")
        else:
            for v in verdicts:
                self.stdout.write(f"{v['status'].upper():<5} {v['title']}" + (f" ({v['count']})" if v["count"] else ""))
                if v.get("why"):
                    self.stdout.write(f"      {v['why']}")
                for offender in v["offenders"]:
                    self.stdout.write(f"      {offender}")
                if v["fix"]:
                    self.stdout.write(f"      fix: {v['fix']}")
        failed = report["failed"]
        if failed:
            raise CommandError(f"validation failed: {', '.join(failed)}")

    def _review(self, opts: dict[str, Any], seen: dict[str, Any], resumed: bool = False) -> None:
        """What a paused fabric's restored state would change on the wire (console.fabric.paused)."""
        if opts.get("json"):
            return self._print(opts, {**seen, "resumed": resumed})
        state = "resumed: pushing" if resumed else (f"paused ({seen['reason']})" if seen["paused"] else "not paused")
        self.stdout.write(f"fabric {seen['fabric']}: {state}")
        if not seen["wire_read"]:
            self.stdout.write(f"  {seen['error']}")
        else:
            for label, key in (
                ("on the wire", "wire_pkeys"),
                ("would add", "would_add"),
                ("would remove", "would_remove"),
            ):
                self.stdout.write(f"  {label + ':':<14}{', '.join(seen[key]) or 'none'}")
            if seen["diff"]:
                self.stdout.write(seen["diff"])
        if seen["paused"] and not resumed:
            self.stdout.write(f"  resume with: manage.py fabric resume --fabric {seen['fabric']} --confirm")

    def _print(self, opts: dict[str, Any], body: Any) -> None:
        if opts.get("json"):
            self.stdout.write(json.dumps(body, indent=2, sort_keys=True, default=str))
        elif isinstance(body, dict) and "change" in body:
            c = body["change"]
            self.stdout.write(f"change {c['id']}: {c['status']}")
            for step in c.get("steps", []):
                self.stdout.write(f"  {step['seq']:>2}. {step['name']:<12} {step['target']:<16} {step['status']}")
            if c.get("diff"):
                self.stdout.write(c["diff"])
        elif isinstance(body, dict) and "discovery_id" in body:
            self.stdout.write(compare_text(body))
        else:
            self.stdout.write(json.dumps(body, indent=2, default=str))


def _agent_row(row: dict[str, Any]) -> str:
    state = "connected" if row["connected"] else ("revoked" if row["revoked"] else "not connected")
    return f"{row['name']:<16} {state:<14} {row['host'] or '-':<20} OpenSM {row['sm_state'] or '-'}"


def compare_text(body: dict[str, Any]) -> str:
    """A compare for people: which discovery, when and how old first, then the verdict, the
    differences and the fix list."""
    fresh = body.get("freshness") or {}
    lines = [
        f"discovery {body['discovery_id']} of {body['design']} r{body['revision']} at {body['discovered_at']}, "
        f"{body.get('discovery_age_s', 0):.1f} s old ({fresh.get('note', '')})",
    ]
    if fresh.get("stale") and not body.get("discovered_now"):
        lines.append("WARNING: the fabric may have changed since this discovery (compare without --no-discover)")
    summary = body.get("summary") or {}
    verdict = "matches the design" if body["ok"] else "differs from the design"
    counts = ", ".join(f"{len(body[k])} {k}" for k in ("missing", "extra", "miswired", "mismatches"))
    lines.append(f"{verdict}: {counts}; {summary.get('matched', '?')}/{summary.get('designed_links', '?')} matched")
    for kind in ("missing", "extra", "miswired", "mismatches"):
        lines += [f"  {kind:<10} {entry['label']}" for entry in body[kind]]
    if body["fixes"]:
        lines.append("fix list:")
        lines += [f"  {n}. {fix}" for n, fix in enumerate(body["fixes"], 1)]
    routing = body.get("routing") or {}
    fallback = "  FALLBACK" if routing.get("fallback") else ""
    lines.append(f"routing: configured {routing.get('configured')}, in use {routing.get('in_use')}{fallback}")
    return "\n".join(lines)
