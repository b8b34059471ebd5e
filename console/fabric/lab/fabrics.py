"""Lab fabrics: which lab (ibsim + a real OpenSM) belongs to which ``Fabric`` row.

``start_lab`` turns a design revision into a running lab and binds it to a Fabric (created or
reused, driver ``lab``); ``lab_for`` finds a running lab from any process (the push pipeline,
discovery, the CLI, the web page); ``stop_lab`` stops it. The lab's workdir and socket name live
in ``fabric.config``, so nothing but the workdir's ``lab.json`` is needed to find it again.

What OpenSM is started with follows the design (:mod:`console.fabric.lab.plan`); cable and
counter faults are injected through :mod:`console.fabric.lab.faults`.
"""

from __future__ import annotations

import contextlib
import fcntl
import shlex
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from console.fabric.lab.manager import Lab
from console.fabric.lab.plan import design_spec, lab_plan
from console.fabric.lab.routing import routing_engine_in_use
from console.fabric.lab.spec import LabError, find_umad2sim
from console.fabric.models import Fabric
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, ConsoleError, NotFound
from designer.models import DesignRevision
from designer.services import revision_graph

#: Debian package → the programs the lab needs from it.
LAB_PACKAGES: dict[str, tuple[str, ...]] = {
    "ibsim-utils": ("ibsim",),
    "opensm": ("opensm",),
    "infiniband-diags": ("ibnetdiscover", "sminfo", "saquery", "smpquery", "perfquery"),
}
INSTALL_HINT = "sudo apt-get install opensm ibsim-utils infiniband-diags"


class LabUnavailable(ConsoleError):
    """The Debian packages the lab needs are not installed."""

    status = 503
    code = "lab_unavailable"


class LabNotRunning(ConsoleError, LabError):
    """The fabric has no running lab (never started, stopped, or its processes died)."""

    status = 409
    code = "lab_not_running"


# -- packages ------------------------------------------------------------------------------


def missing_packages() -> list[str]:
    """Debian packages the lab needs that are not installed (empty when the lab can run)."""
    missing = [pkg for pkg, tools in LAB_PACKAGES.items() if any(not shutil.which(t) for t in tools)]
    if "ibsim-utils" not in missing:
        try:
            find_umad2sim()
        except LabError:
            missing.append("ibsim-utils")
    return missing


def require_lab_packages() -> None:
    """Raise :class:`LabUnavailable` naming what to install when the lab cannot run here."""
    missing = missing_packages()
    if missing:
        raise LabUnavailable(
            f"the lab needs the Debian packages {', '.join(missing)}: {INSTALL_HINT}",
            fields={"missing": missing},
        )


# -- the registry --------------------------------------------------------------------------


def default_workdir(fabric: Fabric) -> Path:
    """Where a fabric's lab lives: ``DATA_DIR/labs/<fabric name>``."""
    return Path(settings.DATA_DIR) / "labs" / (slugify(fabric.name) or f"fabric-{fabric.pk}")


def _default_name(revision: DesignRevision) -> str:
    base = f"{revision.design.name}-r{revision.number}"
    name, n = base, 1
    while Fabric.objects.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _fabric_for(revision: DesignRevision, name: str | None, actor: Actor) -> Fabric:
    """The lab Fabric bound to ``revision`` (by ``name`` if given), created and audited if new."""
    with transaction.atomic():
        if name:
            fabric = Fabric.objects.select_for_update().filter(name=name).first()
            if fabric is not None:
                if fabric.revision_id != revision.pk or fabric.driver != Fabric.Driver.LAB:
                    raise Conflict(
                        f"fabric {name!r} exists bound to {fabric.revision} with driver "
                        f"{fabric.driver}; pick another --name"
                    )
                return fabric
        else:
            fabric = (
                Fabric.objects.select_for_update()
                .filter(revision=revision, driver=Fabric.Driver.LAB)
                .order_by("pk")
                .first()
            )
            if fabric is not None:
                return fabric
        fabric = Fabric.objects.create(
            name=name or _default_name(revision),
            description=f"lab fabric of {revision}",
            driver=Fabric.Driver.LAB,
            revision=revision,
        )
        audit.record(actor, "fabric.create", fabric, after=audit.snapshot(fabric))
        return fabric


@contextlib.contextmanager
def _workdir_lock(workdir: Path) -> Iterator[None]:
    """One start at a time per workdir, across processes (two `lab up` racing each other)."""
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / ".start.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _running_lab(workdir: Path | str | None) -> Lab | None:
    if not workdir:
        return None
    try:
        lab = Lab.attach(workdir)
    except (LabError, OSError, ValueError, TypeError):
        return None
    return lab if lab.is_running() else None


def _bind(fabric: Fabric, lab: Lab, plan_sm_name: str | None = None) -> None:
    status = lab.status()
    config = dict(fabric.config)
    config.update(workdir=status["workdir"], ibsim_sockname=status["ibsim_sockname"])
    if plan_sm_name:
        config["sm_host_name"] = plan_sm_name
    if config != fabric.config:
        Fabric.objects.filter(pk=fabric.pk).update(config=config)
        fabric.config = config


def start_lab(
    revision: DesignRevision,
    *,
    name: str | None = None,
    actor: Actor,
    workdir: Path | str | None = None,
    socket_name: str | None = None,
    wait: bool = True,
    standby: bool = False,
) -> tuple[Fabric, Lab]:
    """Start (or find already running) the lab of ``revision``, bound to its lab Fabric.

    Creates or reuses the Fabric (driver ``lab``); its lab lives in ``workdir`` (default
    ``DATA_DIR/labs/<fabric name>``) with its own ``IBSIM_SOCKNAME`` (derived from the workdir
    unless ``socket_name`` is given). Returns once OpenSM has brought the subnet up (polled
    through sminfo/ibnetdiscover, never the log) unless ``wait`` is False. ``standby``: with a
    standby OpenSM on a second CA (started on a running lab that has none).
    """
    require_lab_packages()
    fabric = _fabric_for(revision, name, actor)
    running = _running_lab(fabric.config.get("workdir"))
    if running is not None:
        if workdir is not None and Path(workdir).resolve() != running.workdir.resolve():
            raise Conflict(
                f"the lab of {fabric.name} already runs in {running.workdir}; stop it first (manage.py lab down)"
            )
        _bind(fabric, running)
        if standby and len(running.sms) == 1:
            _add_standby(fabric, running, revision, actor)
        return fabric, running
    target = Path(workdir) if workdir else default_workdir(fabric)
    with _workdir_lock(target):
        running = _running_lab(target)
        if running is not None:  # another process started it while we waited for the lock
            _bind(fabric, running)
            return fabric, running
        plan = lab_plan(revision_graph(revision))
        spec = design_spec(plan, target.resolve(), socket_name, standby=standby)
        try:
            running = Lab.start(spec, wait=wait)
        except LabError as exc:
            raise ConsoleError(f"lab of {fabric.name} did not start: {exc}", code="lab_failed") from exc
    with transaction.atomic():
        _bind(fabric, running, plan.sm_host_name)
        audit.record(actor, "fabric.lab.start", fabric, after={"lab": running.status()})
    return fabric, running


def _add_standby(fabric: Fabric, lab: Lab, revision: DesignRevision, actor: Actor) -> None:
    """Start a standby OpenSM beside a running lab's (audited)."""
    plan = lab_plan(revision_graph(revision))
    spec = design_spec(plan, lab.workdir, lab.status()["ibsim_sockname"], standby=True)
    try:
        lab.start_standby(spec)
    except LabError as exc:
        raise ConsoleError(f"the standby OpenSM of {fabric.name} did not start: {exc}", code="lab_failed") from exc
    with transaction.atomic():
        audit.record(actor, "fabric.lab.standby", fabric, after={"sms": lab.sms_status()})


def lab_for(fabric: Fabric) -> Lab:
    """The running lab of ``fabric`` (from any process); :class:`LabNotRunning` otherwise."""
    if fabric.driver != Fabric.Driver.LAB:
        raise LabNotRunning(f"fabric {fabric.name} uses the {fabric.driver} driver, not a lab")
    workdir = fabric.config.get("workdir")
    hint = f"start it with: manage.py lab up --design {_design_ref(fabric)}"
    if not workdir:
        raise LabNotRunning(f"no lab has been started for fabric {fabric.name}; {hint}")
    try:
        lab = Lab.attach(workdir)
    except (LabError, OSError, ValueError, TypeError):
        raise LabNotRunning(f"no lab found in {workdir} for fabric {fabric.name}; {hint}") from None
    if not lab.is_running():
        state = lab.status()["state"]
        raise LabNotRunning(f"the lab of fabric {fabric.name} is not running ({state}); {hint}")
    return lab


def _design_ref(fabric: Fabric) -> str:
    revision = fabric.revision
    return f"{revision.design.name}/{revision.number} --name {fabric.name}"


def stop_lab(fabric: Fabric, *, actor: Actor | None = None) -> dict[str, Any]:
    """Stop the fabric's lab (idempotent); returns its final status."""
    workdir = fabric.config.get("workdir")
    if not workdir:
        return lab_status(fabric)
    try:
        lab = Lab.attach(workdir)
    except (LabError, OSError, ValueError, TypeError):
        return lab_status(fabric)
    was_running = lab.is_running()
    lab.stop()  # (its agent too)
    if actor is not None and was_running:
        with transaction.atomic():
            audit.record(actor, "fabric.lab.stop", fabric, before={"workdir": workdir})
    return lab_status(fabric)


def env_line(status: Mapping[str, Any]) -> str:
    """The shell line that points any infiniband-diags tool at the lab."""
    env = status.get("env") or {}
    if not env:
        return ""
    return " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items() if value)


def lab_status(fabric: Fabric, *, probe: bool = False) -> dict[str, Any]:
    """Operator-facing status of a fabric's lab (``state`` ``not_started`` if it never ran);
    ``probe``: each SM's role and priority as its own port answers (``sms``)."""
    base: dict[str, Any] = {
        "fabric_id": fabric.pk,
        "fabric": fabric.name,
        "driver": fabric.driver,
        "design": fabric.revision.design.name,
        "revision": fabric.revision.number,
    }
    workdir = fabric.config.get("workdir")
    lab = None
    if workdir:
        with contextlib.suppress(LabError, OSError, ValueError, TypeError):
            lab = Lab.attach(workdir)
    if lab is None:
        base.update(
            state="not_started",
            workdir=workdir,
            ibsim_sockname=fabric.config.get("ibsim_sockname"),
            umad2sim=None,
            sm_host=None,
            opensm_pid=None,
            sms=[],
            env={},
            env_line="",
        )
        return base
    status = lab.status(probe=probe)
    status.update(base)
    status["sm_host_name"] = fabric.config.get("sm_host_name", "")
    status["env_line"] = "export " + env_line(status) if status["state"] == "up" else ""
    if status["state"] == "up":
        routing = routing_engine_in_use(lab)
        status["routing"] = {"configured": routing.configured, "in_use": routing.in_use, "fallback": routing.fallback}
    return status


# -- lookups for the CLI -------------------------------------------------------------------


def find_revision(ref: str) -> DesignRevision:
    """``<design id or name>[/<revision number>]`` → the revision (default: the latest)."""
    design_ref, _, number = ref.partition("/")
    qs = DesignRevision.objects.select_related("design")
    by: dict[str, Any] = {"design_id": int(design_ref)} if design_ref.isdigit() else {"design__name": design_ref}
    if number and not number.lstrip("r").isdigit():
        raise NotFound(f"bad revision {number!r}: expected a number, e.g. {design_ref}/2")
    if number:
        revision = qs.filter(number=int(number.lstrip("r")), **by).first()
    else:
        revision = qs.filter(**by).order_by("-number").first()
    if revision is None:
        raise NotFound(f"no design revision {ref!r} (give a design id or name, optionally /rev)")
    return revision


def find_fabric(ref: str) -> Fabric:
    """A fabric by id or name."""
    qs = Fabric.objects.select_related("revision__design")
    fabric = (qs.filter(pk=int(ref)).first() if ref.isdigit() else None) or qs.filter(name=ref).first()
    if fabric is None:
        raise NotFound(f"no fabric {ref!r} (give its id or name)")
    return fabric
