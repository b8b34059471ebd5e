"""The agent process on a subnet-manager host (``manage.py agent``).

It connects out to the console's ``/ws/agent/`` (``wss://`` behind TLS; through an HTTP proxy
when one is set: no inbound port on the SM host), authenticates with its token, says hello, sends
a heartbeat with its OpenSM's SMInfo every period, and runs what the console asks of it on its
own host with the OpenSM driver (:class:`~console.fabric.drivers.opensm.OpenSmDriver`): the push
(render, lint, swap, reload, verify, roll back; each step reported as it starts), read-only
verification, the live files, the isolation audit's questions, port administration, discovery
(ibnetdiscover, OpenSM's log mark and routing engine) and whether OpenSM swept since a mark. It holds no
database or broker credentials: it never touches either. On a lost connection it reconnects with
backoff; a revoked or refused token stops it.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from console.fabric.agents import wire
from console.fabric.diags.mad import MadError, shared_session
from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.discovery.sources import DISCOVERY_TIMEOUT, log_swept_since, read_sweep
from console.fabric.drivers.base import DesiredFabric
from console.fabric.drivers.hosts import OpenSmHost
from console.fabric.drivers.opensm import OpenSmDriver
from console.fabric.opensm import drill, ha
from console.fabric.opensm.conf import edit_opensm_conf, parse_opensm_conf
from console.fabric.opensm.files import Artefact, ArtefactStore
from console.fabric.opensm.push_types import PushOptions

log = logging.getLogger("console.agent")
VERSION = "1.0"
MAX_FRAME_BYTES = 8 * 1024 * 1024
#: The longest wait between two connection attempts: a console restarted (a deploy, a crash) is
#: found within seconds, which a push waiting for the agent needs; an agent per SM host makes a
#: few attempts a second at most against a console that is down.
MAX_BACKOFF_S = 5.0
#: How often the agent asks its own OpenSM for its state (one local SMInfo MAD): a change is sent
#: at once, and a takeover raises the SM's priority within this long.
SM_WATCH_S = 1.0


class Progress(Protocol):
    """An operation's report: a step as it starts, or (``part``) a part of its result sent ahead
    of the rest (a sweep's counters, a chunk of switches at a time)."""

    def __call__(self, step: str, status: str, part: dict[str, Any] | None = None) -> None: ...


#: An operation: its payload and a :class:`Progress` in, its JSON result out.
Op = Callable[[dict[str, Any], Progress], dict[str, Any]]


class SmDown(RuntimeError):
    """This host's OpenSM does not answer: a push waits for it (never restarts it in passing)."""


class Refused(RuntimeError):
    """The console refused this agent (unknown or revoked token, another fabric): stop."""


@dataclass(frozen=True)
class AgentConfig:
    """Where the console is and who this agent is (the token stays out of any repr)."""

    console: str  # http(s)://host[:port] of the console
    fabric: str
    token: str
    name: str = ""
    heartbeat_s: float = 5.0
    proxy: str | None = None
    frame_chars: int = (
        48 * 1024
    )  # results longer than this go in parts (the server's frame limit)  # None: the environment's https_proxy/http_proxy, as websockets reads it

    def url(self) -> str:
        parts = urlsplit(self.console)
        scheme = {"https": "wss", "http": "ws", "wss": "wss", "ws": "ws"}.get(parts.scheme)
        if scheme is None or not parts.netloc:
            raise ValueError(f"--console must be http(s)://host[:port], not {self.console!r}")
        return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/ws/agent/", "", ""))

    def __repr__(self) -> str:
        return f"AgentConfig(console={self.console!r}, fabric={self.fabric!r}, name={self.name!r})"


class Agent:
    """One agent: a connection loop and the operations it runs on its host."""

    def __init__(
        self,
        config: AgentConfig,
        host: OpenSmHost,
        *,
        diag_timeout: float = 5.0,
        extra_ops: Mapping[str, Op] | None = None,
    ) -> None:
        self.config = config
        self.host = host
        self.driver = OpenSmDriver(host, diag_timeout=diag_timeout)
        self._send_lock = threading.Lock()
        self._own_lid: int | None = None  # this host's port's LID, once looked up
        self.ops: dict[str, Op] = {
            "push": self._push,
            "verify": self._verify,
            "read_live": lambda payload, progress: {"files": self.driver.read_live()},
            "probe_isolation": self._probe,
            "set_port_state": self._port,
            "sminfo": lambda payload, progress: self.sminfo(),
            "discover": self._discover,
            "swept_since": self._swept_since,
            "port_tables": self._port_tables,
            "sm_stop": self._sm_stop,
            "sm_start": lambda payload, progress: self._sm_start(),
            **(extra_ops or {}),  # the live collector's reads (console.telemetry.agent_ops)
        }

    # -- the connection ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Connect, serve, reconnect (1 s, doubling to :data:`MAX_BACKOFF_S`, ±20 %) until
        ``stop`` or a refusal."""
        backoff = 1.0
        while not stop.is_set():
            try:
                with connect(
                    self.config.url(),
                    additional_headers={"Authorization": f"Bearer {self.config.token}"},
                    max_size=MAX_FRAME_BYTES,
                    proxy=self.config.proxy if self.config.proxy is not None else True,
                    open_timeout=10,
                    # no permessage-deflate: what is worth compressing is compressed by the
                    # operation (a sweep's plan and answers); deflating every frame again cost
                    # both ends several ms a sweep
                    compression=None,
                ) as ws:
                    backoff = 1.0
                    self._serve(ws, stop)
            except InvalidStatus as exc:
                if exc.response.status_code in (401, 403):
                    raise Refused(f"the console refused the agent's token ({exc.response.status_code})") from exc
                log.warning("console answered %s; retrying in %.0f s", exc.response.status_code, backoff)
            except (OSError, WebSocketException, TimeoutError) as exc:
                log.warning("no connection to the console (%s); retrying in %.0f s", exc, backoff)
            if stop.wait(backoff * random.uniform(0.8, 1.2)):
                return
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _send(self, ws: Connection, message: dict[str, Any]) -> None:
        with self._send_lock:
            ws.send(json.dumps(message, separators=(",", ":")))

    def _serve(self, ws: Connection, stop: threading.Event) -> None:
        host = self.config.name or socket.gethostname()
        self._send(ws, {"type": "hello", "fabric": self.config.fabric, "host": host, "version": VERSION})
        first = json.loads(ws.recv(timeout=10))
        if first.get("type") != "welcome":
            raise Refused(str(first.get("detail") or first))
        log.info("connected to %s as the agent of fabric %s", self.config.console, first.get("fabric"))
        beat = threading.Thread(target=self._heartbeats, args=(ws, stop), name="agent-heartbeat", daemon=True)
        beat.start()
        # a push (seconds) never holds up a sweep's counter read (every second) or a discovery
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-op") as pool:
            while not stop.is_set():
                try:
                    raw = ws.recv(timeout=1.0)
                except TimeoutError:
                    continue
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "request":
                    pool.submit(self._handle, ws, message)
                elif kind == "revoked":
                    raise Refused("the console revoked this agent")
                elif kind == "error":
                    log.warning("the console says: %s", message.get("detail"))

    def _heartbeats(self, ws: Connection, stop: threading.Event) -> None:
        """A heartbeat every period, and at once when this host's OpenSM changes state (it looks
        every :data:`SM_WATCH_S`): a takeover reaches the console within a second. When it took
        over from standby, its priority is raised first (:meth:`_hold_mastership`)."""
        last_sent = 0.0
        previous = ""
        was_standby = False
        announce = False
        while not stop.is_set():
            sm = self.sminfo()
            state = str(sm.get("state") or "")
            if state == "STANDBY":
                was_standby = True
            elif state == "MASTER" and was_standby:
                was_standby = False
                announce = True
                self._hold_mastership()
            elif state != "DISCOVERING":
                was_standby = False
            if state != previous or time.monotonic() - last_sent >= self.config.heartbeat_s:
                # told to the console until it has heard it: this master was this host's standby
                # (an OpenSM back from its own restart as master passes through DISCOVERING too)
                sm["took_over"] = announce
                try:
                    self._send(ws, {"type": "heartbeat", "sm": sm, "config": self.config_state()})
                except (OSError, WebSocketException):
                    return  # the connection is gone; the main loop reconnects
                announce = False
                last_sent, previous = time.monotonic(), state
            stop.wait(min(SM_WATCH_S, self.config.heartbeat_s))

    def _hold_mastership(self) -> None:
        """This host's OpenSM just took over from standby: raise its priority to the takeover
        priority at once (its opensm.conf edited, SIGHUP), before the old master can come back
        with its own higher one and take mastership back (OpenSM hands over to any SM of higher
        priority it finds). The console's next push sets the priorities it decides; this is the
        same one (:mod:`console.fabric.opensm.ha`)."""
        store = self.host.artefacts
        live = store.read("opensm.conf") or ""
        wanted = {"sm_priority": str(ha.TAKEOVER_PRIORITY)}
        if parse_opensm_conf(live).get("sm_priority") == wanted["sm_priority"]:
            return
        try:
            store.swap([Artefact("opensm-conf", "opensm.conf", edit_opensm_conf(live, wanted))])
            self.host.reload()
            store.mark_good(["opensm.conf"])
        except Exception:  # reported; the console's next push sets it anyway
            log.exception("could not raise this SM's priority after its takeover")
            return
        log.info("took over as master: sm_priority %s", ha.TAKEOVER_PRIORITY)

    def _handle(self, ws: Connection, message: dict[str, Any]) -> None:
        rid, op = message.get("id"), str(message.get("op"))

        def progress(step: str, status: str, part: dict[str, Any] | None = None) -> None:
            message: dict[str, Any] = {"type": "progress", "id": rid, "step": step}
            if part is not None:
                message["result"] = part
            self._send(ws, message)

        try:
            handler = self.ops.get(op)
            if handler is None:
                raise ValueError(f"unknown operation {op!r}")
            result = handler(dict(message.get("payload") or {}), progress)
        except SmDown as exc:
            log.warning("%s waits: %s", op, exc)
            self._send(ws, {"type": "error", "id": rid, "detail": str(exc), "code": wire.SM_DOWN})
            return
        except Exception as exc:  # reported to the caller, never lost in the agent's log only
            log.exception("%s failed", op)
            self._send(ws, {"type": "error", "id": rid, "detail": f"{type(exc).__name__}: {exc}"})
            return
        text = json.dumps(result, separators=(",", ":"))
        size = self.config.frame_chars
        if len(text) <= size:
            self._send(ws, {"type": "result", "id": rid, "result": result})
            return
        # A server takes frames of a bounded size (uvicorn --ws-max-size): a big result (a
        # 2,048-port push's step logs) goes in parts the console puts together again.
        parts = [text[i : i + size] for i in range(0, len(text), size)]
        for i, part in enumerate(parts):
            self._send(ws, {"type": "result_part", "id": rid, "part": i, "of": len(parts), "data": part})
        log.info("sent the result of %s in %d parts", op, len(parts))

    # -- the operations ------------------------------------------------------------------------

    def sminfo(self) -> dict[str, Any]:
        """The SMInfo of the SM on this host's own port: MASTER, STANDBY…, or NO ANSWER when no
        OpenSM runs here. Asked every second (:data:`SM_WATCH_S`) through the host's long-lived
        MAD helper at the port's own LID (one MAD, no process, no new umad client); the LID is
        looked up with ``smpquery -D portinfo 0`` when not known yet, and the slow way
        (``sminfo -D 0``) answers while the port has none."""
        diags = self.host.diags(timeout=3)
        try:
            if self._own_lid is None:
                self._own_lid = diags.portinfo_local().lid or None
            info = shared_session(diags.env, timeout=3).sminfo(self._own_lid) if self._own_lid else None
        except (DiagError, MadError) as exc:
            self._own_lid = None
            return {"state": "NO ANSWER", "error": str(exc)[:200]}
        if self._own_lid is None:
            try:
                slow = diags.own_sminfo()
            except DiagError as exc:
                return {"state": "NO ANSWER", "error": str(exc)[:200]}
            return {
                "state": slow.state,
                "priority": slow.priority,
                "guid": f"0x{slow.guid:016x}",
                "activity": slow.activity_count,
            }
        if info is None:  # no SM answers at this port (or its LID changed: looked up again)
            self._own_lid = None
            return {"state": "NO ANSWER", "error": "no SMInfo answer from this port"}
        return {
            "state": str(info["state"]),
            "priority": int(info["priority"]),
            "guid": f"0x{int(info['guid']):016x}",
            "lid": self._own_lid,
            "activity": int(info["act_count"]),
        }

    def config_state(self) -> dict[str, Any]:
        """The hash of the files this host's OpenSM runs (what every SM host of the fabric must
        run alike) and the priority its opensm.conf sets."""
        try:
            files = self.driver.read_live()
        except OSError as exc:
            return {"error": str(exc)[:200]}
        return {"hash": ha.config_hash(files), "priority": ha.conf_priority(files)}

    def _push(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        desired = DesiredFabric.from_json(payload["desired"])
        previous = DesiredFabric.from_json(payload["previous"]) if payload.get("previous") else None
        options = self._options(payload)
        driver = self.driver
        sm = self.sminfo()
        if sm.get("state") not in wire.SM_UP:
            if not options.standby:
                raise SmDown(f"OpenSM does not answer on this host ({sm.get('error') or sm.get('state')})")
            # A standby whose OpenSM is down gets the files all the same: it reads them when it
            # starts, so it comes back with the fabric's partitions and its standby priority.
            driver = OpenSmDriver(FilesOnly(self.host), diag_timeout=driver.diag_timeout)
        result = driver.push(desired, previous=previous, options=options, progress=progress)
        return {**wire.result_to_json(result), "config": self.config_state()}

    def _options(self, payload: dict[str, Any]) -> PushOptions:
        """The request's push options, its diag processes at once capped by what this host can
        run (a lab's ibsim serves ten umad clients in all: ``LabHost.parallel_diags``)."""
        options = wire.options_from_json(payload["options"])
        limit = getattr(self.host, "parallel_diags", None)
        return replace(options, parallel=min(options.parallel, limit)) if isinstance(limit, int) else options

    def _verify(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        desired = DesiredFabric.from_json(payload["desired"])
        return {"mismatches": self.driver.verify(desired, options=self._options(payload))}

    def _probe(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        plan = wire.plan_from_json(payload["plan"])
        probe = self.driver.probe_isolation(plan, options=self._options(payload))
        return wire.probe_to_json(probe)

    def _discover(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        log, engine = self.host.sm_log()
        sweep = read_sweep(self.host.diags(timeout=DISCOVERY_TIMEOUT), log, engine, progress)
        return {"stdout": sweep.stdout, "sm_mark": sweep.sm_mark, "routing": sweep.routing}

    def _swept_since(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        return {"swept": log_swept_since(self.host.sm_log()[0], int(payload["mark"]))}

    def _port_tables(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        """The P_Key and QoS tables of the given ports, read over SMPs from this host."""
        diags = self.host.diags(timeout=60)
        guids = [int(g, 16) for g in payload["guids"]]
        return {"ports": drill.read_tables(diags, shared_session(diags.env, timeout=60), guids)}

    def _sm_stop(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        """Kill this host's OpenSM (a failover drill on a lab; a real SM host refuses: its drill
        is a dry run)."""
        stop = getattr(self.host, "stop_sm", None)
        if not callable(stop):
            raise ValueError("this SM host does not stop its OpenSM for a drill (a lab's does): run it as a dry run")
        stop()
        return {"stopped": True}

    def _sm_start(self) -> dict[str, Any]:
        """Start this host's OpenSM again (its files as they are now) and say what it is."""
        self.host.restart()
        return {"sm": self.sminfo()}

    def _port(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        result = self.driver.set_port_state(
            str(payload["switch"]),
            int(payload["port"]),
            bool(payload["enabled"]),
            width=payload.get("width"),
            speed=payload.get("speed"),
        )
        return wire.port_state_to_json(result)


class FilesOnly:
    """An SM host whose OpenSM is not running: its files are written, nothing is signalled."""

    def __init__(self, host: OpenSmHost) -> None:
        self.host = host

    @property
    def artefacts(self) -> ArtefactStore:
        return self.host.artefacts

    def reload(self) -> None:
        log.info("OpenSM is not running here: it reads the new files when it starts")

    def restart(self) -> None:
        self.reload()

    def diags(self, *, timeout: float | None = None) -> DiagRunner:
        return self.host.diags(timeout=timeout)

    def sm_log(self) -> tuple[Path | None, str]:
        return self.host.sm_log()

    def phy_dir(self) -> Path | None:
        return self.host.phy_dir()

    def conf_needs(self) -> dict[str, str]:
        needs = getattr(self.host, "conf_needs", None)
        return dict(needs()) if callable(needs) else {}


def run_forever(agent: Agent, stop: threading.Event | None = None) -> None:
    """Serve until stopped (the command's main loop)."""
    stop = stop or threading.Event()
    started = time.monotonic()
    agent.run(stop)
    log.info("agent stopped after %.0f s", time.monotonic() - started)
