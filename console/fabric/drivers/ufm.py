"""The ``ufm`` driver: NVIDIA UFM Enterprise REST (PKey GUIDs API, ports, version, actions).

Endpoints used (UFM Enterprise REST API guide, "PKey GUIDs REST API", ``/ufmRest/resources/``):

====================================================  ==========================================
``GET  /ufmRest/app/ufm_version``                      version (``ufm_release_version``)
``GET  /ufmRest/resources/pkeys?guids_data=true``      all PKeys with GUIDs and QoS
``POST /ufmRest/resources/pkeys/add``                  create a PKey without GUIDs
``PUT  /ufmRest/resources/pkeys``                      set (replace) a PKey's GUIDs
``POST /ufmRest/resources/pkeys``                      add GUIDs to a PKey
``DELETE /ufmRest/resources/pkeys/<pkey>/guids/<g,…>`` remove GUIDs from a PKey
``DELETE /ufmRest/resources/pkeys/<pkey>``             delete a PKey
``PUT  /ufmRest/resources/pkeys/qos_conf``             a PKey's QoS (``service_level`` …)
``GET  /ufmRest/resources/ports``                      ports (GUIDs, states) for verification
``POST /ufmRest/actions``                              port ``enable`` / ``disable``
``GET  /ufmRest/app/sharp/allocate_resources``         SHARP reservations (read only, ufm_sharp.py)
====================================================  ==========================================

GUIDs go over the wire as 16 hex digits without ``0x``; P_Keys as ``0x`` hex strings. The push
is the same pipeline as OpenSM's: render → lint (the project's partition linter) → apply
(set-style: only what differs) → verify (read back from UFM and every member GUID present on
the fabric; for partitions holding SHARP trees, SHARP's reservation of the P_Key with exactly its
GUIDs) → rollback to the snapshot taken before apply. The tests run it against
``tests/fabric/ufm_fake.py:UfmContractFake``, a contract fake of exactly these endpoints.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from console.fabric.drivers.base import (
    DesiredFabric,
    DriverError,
    DriverUnavailable,
    PortStateResult,
    Progress,
    no_progress,
)
from console.fabric.drivers.registry import register_driver
from console.fabric.drivers.ufm_sharp import sharp_mismatches
from console.fabric.opensm.lint import LintProblem, format_guid
from console.fabric.opensm.partitions import (
    DEFAULT_PKEY,
    Membership,
    Partition,
    lint_partitions,
    render_partitions,
)
from console.fabric.opensm.push import PushOptions, PushResult, PushStep

# The state of one PKey as compared: name, ipoib, {guid: membership}, SL.
PkeyState = dict[str, Any]


class UfmError(DriverError):
    """UFM answered with an error status."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        self.status = status
        super().__init__(f"UFM {method} {path}: HTTP {status}: {body[:300]}")


class UfmClient:
    """A small, typed client of the UFM REST endpoints above (stdlib only, with timeouts)."""

    def __init__(
        self,
        base_url: str,
        *,
        username: str = "",
        password: str = "",
        timeout: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._auth = ""
        if username:  # UFM's basic authentication
            raw = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._auth = f"Basic {raw}"

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One JSON request; raises :class:`UfmError` (4xx/5xx) or DriverUnavailable."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read().decode() or "null"
        except urllib.error.HTTPError as exc:
            raise UfmError(method, path, exc.code, exc.read().decode(errors="replace")) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise DriverUnavailable(f"UFM {self.base_url} unreachable: {exc}") from exc
        return json.loads(raw)

    def version(self) -> dict[str, Any]:
        """``GET /ufmRest/app/ufm_version``."""
        return self.request("GET", "/ufmRest/app/ufm_version")

    def pkeys(self) -> dict[str, Any]:
        """Every PKey with its GUIDs and QoS."""
        return self.request("GET", "/ufmRest/resources/pkeys?guids_data=true") or {}

    def create_pkey(self, pkey: int, *, name: str, ipoib: bool, sl: int) -> None:
        """Create an empty PKey."""
        body = {"pkey": f"{pkey:#x}", "partition_name": name, "ip_over_ib": ipoib, "index0": False, "service_level": sl}
        self.request("POST", "/ufmRest/resources/pkeys/add", body)

    def set_guids(self, pkey: int, members: Mapping[str, str], *, ipoib: bool) -> None:
        """Replace a PKey's GUIDs with ``members`` (guid → full|limited)."""
        guids = sorted(members)
        body = {
            "pkey": f"{pkey:#x}",
            "guids": guids,
            "ip_over_ib": ipoib,
            "index0": False,
            "memberships": [members[g] for g in guids],
        }
        self.request("PUT", "/ufmRest/resources/pkeys", body)

    def remove_guids(self, pkey: int, guids: list[str]) -> None:
        """Remove GUIDs from a PKey."""
        self.request("DELETE", f"/ufmRest/resources/pkeys/{pkey:#x}/guids/{','.join(guids)}")

    def delete_pkey(self, pkey: int) -> None:
        """Delete a PKey."""
        self.request("DELETE", f"/ufmRest/resources/pkeys/{pkey:#x}")

    def set_qos(self, pkey: int, sl: int) -> None:
        """Set a PKey's service level."""
        body = {"pkey": f"{pkey:#x}", "service_level": sl}
        self.request("PUT", "/ufmRest/resources/pkeys/qos_conf", body)

    def ports(self) -> list[dict[str, Any]]:
        """Every port UFM knows."""
        return self.request("GET", "/ufmRest/resources/ports") or []

    def port_action(self, action: str, *, system: str, port_name: str) -> None:
        """``enable``/``disable`` one port of a switch system."""
        body = {
            "action": action,
            "identifier": "id",
            "object_type": "System",
            "object_ids": [system],
            "params": {"port_id": port_name},
            "description": "",
        }
        self.request("POST", "/ufmRest/actions", body)


def _wire_guid(guid: int) -> str:
    return format_guid(guid)[2:]


def desired_pkeys(partitions: list[Partition], sls: Mapping[int, int] | None = None) -> dict[int, PkeyState]:
    """What UFM should hold per P_Key (the Default partition is UFM's own business)."""
    sls = sls or {}
    out: dict[int, PkeyState] = {}
    for p in partitions:
        if p.pkey == DEFAULT_PKEY:
            continue
        members = {}
        for m in p.members:
            if isinstance(m.port, int):
                ms = p.effective_membership(m)
                members[_wire_guid(m.port)] = "limited" if ms is Membership.LIMITED else "full"
        out[p.pkey] = {
            "name": p.name,
            "ipoib": p.ipoib,
            "members": members,
            "sl": sls.get(p.pkey, 0),
        }
    return out


def _sls(desired: DesiredFabric) -> dict[int, int]:
    return {c.pkey: c.sl for c in desired.qos.classes} if desired.qos else {}


def _sharp_want(want: Mapping[int, PkeyState], desired: DesiredFabric) -> dict[int, set[str]]:
    """P_Key → member GUIDs of the partitions that hold SHARP trees (SHARP AM reserves a P_Key's GUIDs)."""
    return {pkey: set(want[pkey]["members"]) for pkey in sorted(desired.sharp_pkeys) if pkey in want}


def live_pkeys(raw: Mapping[str, Any]) -> dict[int, PkeyState]:
    """UFM's ``GET pkeys`` answer in the same shape as :func:`desired_pkeys`."""
    out: dict[int, PkeyState] = {}
    for key, value in raw.items():
        pkey = int(key, 16) & 0x7FFF
        if pkey == DEFAULT_PKEY:
            continue
        members = {
            str(g["guid"]).lower().removeprefix("0x"): g.get("membership", "full") for g in value.get("guids", [])
        }
        qos = value.get("qos_conf") or {}
        out[pkey] = {
            "name": value.get("partition", ""),
            "ipoib": bool(value.get("ip_over_ib")),
            "members": members,
            "sl": int(qos.get("service_level", 0)),
        }
    return out


class UfmDriver:
    """Partitions, QoS and port admin through UFM; verified by reading UFM and its ports back."""

    name = "ufm"

    def __init__(self, client: UfmClient, *, verify_timeout: float = 10.0) -> None:
        self.client = client
        self.verify_timeout = verify_timeout

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> UfmDriver:
        """``{"url": …, "username": …, "password_env": "UFM_PASSWORD"}`` (never the secret)."""
        url = config.get("url")
        if not url:
            raise DriverUnavailable("ufm driver needs config.url")
        client = UfmClient(
            url,
            username=config.get("username", ""),
            password=os.environ.get(config.get("password_env", ""), ""),
            timeout=float(config.get("timeout", 10.0)),
        )
        return cls(client, verify_timeout=float(config.get("verify_timeout", 10.0)))

    # -- reads ---------------------------------------------------------------------------------

    def read_applied(self) -> dict[str, str]:
        """UFM's PKeys as canonical JSON (one pseudo-artefact)."""
        state = live_pkeys(self.client.pkeys())
        text = json.dumps({f"{k:#06x}": v for k, v in sorted(state.items())}, indent=1)
        return {"ufm-pkeys.json": text + "\n"}

    def verify(self, desired: DesiredFabric, *, options: PushOptions | None = None) -> list[str]:
        """Mismatches between ``desired`` and UFM (and member GUIDs missing from the fabric)."""
        want = desired_pkeys(list(desired.partitions), _sls(desired))
        return self._mismatches(want, managed=None) + sharp_mismatches(self.client, _sharp_want(want, desired))

    def _mismatches(self, want: dict[int, PkeyState], managed: set[int] | None) -> list[str]:
        live = live_pkeys(self.client.pkeys())
        problems = []
        for pkey, state in sorted(want.items()):
            have = live.get(pkey)
            if have is None:
                problems.append(f"P_Key {pkey:#06x}: missing in UFM")
                continue
            if have["members"] != state["members"]:
                extra = sorted(set(have["members"]) - set(state["members"]))
                lost = sorted(set(state["members"]) - set(have["members"]))
                diff = [g for g in state["members"] if have["members"].get(g) != state["members"][g]]
                problems.append(
                    f"P_Key {pkey:#06x}: members differ (missing {lost[:4]}, extra {extra[:4]}, membership {diff[:4]})"
                )
            if have["sl"] != state["sl"]:
                problems.append(f"P_Key {pkey:#06x}: SL {have['sl']}, expected {state['sl']}")
        for pkey in sorted((managed or set()) - set(want)):
            if pkey in live:
                problems.append(f"P_Key {pkey:#06x}: still in UFM, should be gone")
        known = {str(p.get("guid", "")).lower().removeprefix("0x") for p in self.client.ports()}
        for pkey, state in sorted(want.items()):
            for guid in sorted(set(state["members"]) - known):
                problems.append(f"0x{guid} (member of P_Key {pkey:#06x}): not on the fabric")
        return problems

    # -- writes --------------------------------------------------------------------------------

    def _apply(self, want: dict[int, PkeyState], live: dict[int, PkeyState], managed: set[int], log: list[str]) -> int:
        """Make UFM hold ``want`` for every managed P_Key; returns the number of calls made."""
        calls = 0
        for pkey, state in sorted(want.items()):
            have = live.get(pkey)
            if have is None:
                self.client.create_pkey(pkey, name=state["name"], ipoib=state["ipoib"], sl=state["sl"])
                log.append(f"created P_Key {pkey:#06x} ({state['name']})")
                calls += 1
                have = {"members": {}, "sl": state["sl"], "ipoib": state["ipoib"]}
            if have["members"] != state["members"] or have["ipoib"] != state["ipoib"]:
                if state["members"]:
                    self.client.set_guids(pkey, state["members"], ipoib=state["ipoib"])
                else:
                    self.client.remove_guids(pkey, sorted(have["members"]))
                log.append(f"set {len(state['members'])} GUIDs on P_Key {pkey:#06x}")
                calls += 1
            if have["sl"] != state["sl"]:
                self.client.set_qos(pkey, state["sl"])
                log.append(f"P_Key {pkey:#06x}: SL {state['sl']}")
                calls += 1
        for pkey in sorted(managed - set(want)):
            if pkey in live:
                self.client.delete_pkey(pkey)
                log.append(f"deleted P_Key {pkey:#06x}")
                calls += 1
        return calls

    def push(
        self,
        desired: DesiredFabric,
        *,
        previous: DesiredFabric | None = None,
        options: PushOptions | None = None,
        progress: Progress = no_progress,
    ) -> PushResult:
        """render → lint → apply → verify → (rollback), the OpenSM pipeline's shape."""
        options = options or PushOptions()
        started = time.monotonic()
        steps: list[PushStep] = []

        def step(name: str) -> PushStep:
            progress(name, "running")
            s = PushStep(name, status="running")
            steps.append(s)
            return s

        def finish(outcome: str, **kw: Any) -> PushResult:
            return PushResult(outcome, steps, duration_s=round(time.monotonic() - started, 3), **kw)

        s = step("render")
        partitions = list(desired.partitions)
        try:
            text = render_partitions(partitions)
        except ValueError as exc:
            s.status, s.log = "failed", [str(exc)]
            return finish("refused", problems=[LintProblem("ufm", None, "render", str(exc))])
        want = desired_pkeys(partitions, _sls(desired))
        s.status = "ok"
        s = step("lint")
        problems = lint_partitions(text)
        for p in partitions:
            for m in p.members:
                if p.pkey != DEFAULT_PKEY and not isinstance(m.port, int):
                    problems.append(
                        LintProblem("ufm", None, "unsupported", f"{p.name}: UFM takes port GUIDs, not {m.port}")
                    )
        if problems:
            s.status, s.log = "failed", [str(p) for p in problems]
            return finish("refused", problems=problems)
        s.status = "ok"
        managed = set(want) | {p.pkey for p in (previous.partitions if previous else ())}
        managed.discard(DEFAULT_PKEY)

        s = step("apply")
        t = time.monotonic()
        snapshot = live_pkeys(self.client.pkeys())
        calls = self._apply(want, snapshot, managed, s.log)
        s.status = "ok" if calls else "skipped"
        s.duration_s = time.monotonic() - t

        s = step("verify")
        mismatches, s.duration_s = self._poll(lambda: self._mismatches(want, managed), options)
        if mismatches:
            s.status, s.log = "failed", s.log + mismatches
        else:
            s.status = "ok"
            s.log.append(f"{len(want)} P_Keys read back from UFM; member GUIDs on the fabric")
            if sharp := _sharp_want(want, desired):
                # SHARP AM follows the SM's P_Keys on its own: poll its reservations until they match.
                s = step("sharp")
                mismatches, s.duration_s = self._poll(lambda: sharp_mismatches(self.client, sharp), options)
                s.status = "failed" if mismatches else "ok"
                s.log += mismatches or [f"{len(sharp)} SHARP reservations read back from UFM with exactly their GUIDs"]
        if not mismatches:
            result = finish("verified" if calls else "unchanged")
            if desired.qos_options is not None:
                # UFM runs its own SM: SL2VL and VL arbitration are UFM's configuration, not this API's.
                skipped = PushStep("qos-vl", status="skipped")
                skipped.log.append("SL2VL/VL arbitration not pushed: set them in UFM's SM configuration")
                result.steps.append(skipped)
            self._port_admin(desired, result, progress)
            return result

        s = step("rollback")
        t = time.monotonic()
        restore = {k: v for k, v in snapshot.items() if k in managed}
        self._apply(restore, live_pkeys(self.client.pkeys()), managed, s.log)
        # Only UFM's own state is judged here: a GUID already absent before is not ours to fix.
        again = [m for m in self._mismatches(restore, managed) if "not on the fabric" not in m]
        s.duration_s = time.monotonic() - t
        s.status = "ok" if not again else "failed"
        s.log += again
        outcome = "rolled_back" if s.status == "ok" else "rollback_failed"
        return finish(outcome, mismatches=mismatches)

    def _poll(self, check: Callable[[], list[str]], options: PushOptions) -> tuple[list[str], float]:
        """``check()`` until it finds nothing or the verify timeout passes: (its last answer, seconds)."""
        t = time.monotonic()
        deadline = t + min(options.verify_timeout, self.verify_timeout)
        while (mismatches := check()) and time.monotonic() <= deadline:
            time.sleep(options.poll_interval)
        return mismatches, time.monotonic() - t

    # -- ports -----------------------------------------------------------------------------------

    def _port(self, switch: str, port: int) -> dict[str, Any]:
        for p in self.client.ports():
            if p.get("system_name") == switch and int(p.get("number", -1)) == port:
                return p
        raise DriverError(f"UFM knows no port {switch}[{port}]")

    def set_port_state(
        self,
        switch: str,
        port: int,
        enabled: bool,
        *,
        width: int | None = None,
        speed: int | None = None,
    ) -> PortStateResult:
        """``POST /ufmRest/actions`` enable/disable, verified by reading the port back.

        Link width/speed are not set through UFM here (the switch driver does that over SMPs).
        """
        result = PortStateResult(switch, port, enabled, changed=False, verified=False)
        if width is not None or speed is not None:
            result.log.append(f"{switch}[{port}]: the UFM driver does not set link width/speed")
            return result

        def is_enabled(p: dict[str, Any]) -> bool:
            return str(p.get("physical_state", "")).lower() != "disabled"

        current = self._port(switch, port)
        if is_enabled(current) == enabled:
            result.verified = True
            result.log.append(f"{switch}[{port}] already {'enabled' if enabled else 'disabled'}")
            return result
        action = "enable" if enabled else "disable"
        self.client.port_action(action, system=current["systemID"], port_name=current["name"])
        result.changed = True
        deadline = time.monotonic() + self.verify_timeout
        while time.monotonic() < deadline:
            if is_enabled(self._port(switch, port)) == enabled:
                result.verified = True
                result.log.append(f"{switch}[{port}] reads back {action}d")
                return result
            time.sleep(0.1)
        result.log.append(f"{switch}[{port}] did not read back {action}d")
        return result

    def _port_admin(self, desired: DesiredFabric, result: PushResult, progress: Progress) -> None:
        for wanted in sorted(desired.port_admin):
            progress(f"port-admin:{wanted.label}", "running")
            s = PushStep(f"port-admin:{wanted.label}", status="running")
            result.steps.append(s)
            try:
                outcome = self.set_port_state(
                    wanted.switch, wanted.port, wanted.enabled, width=wanted.width, speed=wanted.speed
                )
            except DriverError as exc:
                outcome = PortStateResult(wanted.switch, wanted.port, wanted.enabled, False, False)
                outcome.log.append(str(exc))
            s.log += outcome.log
            if not outcome.verified:
                s.status, result.outcome = "failed", "failed"
                result.mismatches.append(f"{wanted.label}: not {'up' if wanted.enabled else 'down'}")
            else:
                s.status = "ok" if outcome.changed else "skipped"
                if outcome.changed and result.outcome == "unchanged":
                    result.outcome = "verified"


@register_driver("ufm")
def ufm_driver(fabric: Any) -> UfmDriver:
    """The driver of a UFM-managed fabric (URL and credentials in ``fabric.config``)."""
    return UfmDriver.from_config(fabric.config or {})
