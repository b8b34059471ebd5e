"""UFM's wire vocabulary as plain typed functions: GUID and P_Key spellings, bodies, errors.

Nothing here touches the database. GUIDs arrive in every spelling clients send — 16 hex digits
(UFM's own and ib-kubernetes's), ``0x``-prefixed (the console's), colon-separated (how
ib-kubernetes and ``ip link`` print them) — and leave as UFM spells them: 16 lower-case hex digits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_HEX = re.compile(r"^[0-9a-fA-F]{1,20}$")
_PKEY = re.compile(r"^(0[xX])?[0-9a-fA-F]{1,4}$")
MEMBERSHIPS = ("full", "limited")
#: UFM's name for a P_Key created by adding GUIDs to it (what UFM itself names them).
NAME_PREFIX = "api_pkey_"


class UfmError(Exception):
    """A refusal in UFM's shape: ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after  # seconds, sent as Retry-After (a 429)

    def body(self) -> dict[str, str]:
        return {"error": self.message}


def parse_guid(value: Any) -> int:
    """``0002c90300000101``, ``0x0002c90300000101``, ``00:02:c9:03:00:00:01:01`` → the GUID.

    UFM documents GUIDs as hex strings of 16 to 20 characters; longer spellings must still fit
    in 64 bits (leading zeros). Zero is no port.
    """
    if not isinstance(value, str):
        raise UfmError(400, f"GUID {value!r} is not a string")
    text = value.strip()
    if text[:2] in ("0x", "0X"):
        text = text[2:]
    if ":" in text or "-" in text:
        parts = re.split(r"[:-]", text)
        if len(parts) != 8 or any(len(p) != 2 for p in parts):
            raise UfmError(400, f"GUID {value!r}: colon-separated GUIDs have 8 groups of 2 hex digits")
        text = "".join(parts)
    if not _HEX.match(text) or len(text) < 16:
        raise UfmError(400, f"GUID {value!r} is not a hex string of 16-20 characters")
    guid = int(text, 16)
    if guid == 0 or guid >= 1 << 64:
        raise UfmError(400, f"GUID {value!r} is outside 64 bits")
    return guid


def ufm_guid(guid: int) -> str:
    """How UFM spells a GUID in its answers: 16 lower-case hex digits, no prefix."""
    return f"{guid:016x}"


def parse_guids(values: Any) -> list[int]:
    """A non-empty list of GUIDs (each in any spelling), duplicates dropped, order kept."""
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    if not isinstance(values, list) or not values:
        raise UfmError(400, "guids must be a non-empty list of GUIDs")
    out: list[int] = []
    for value in values:
        guid = parse_guid(value)
        if guid not in out:
            out.append(guid)
    return out


def parse_pkey(value: Any) -> int:
    """``"0x5"``, ``"0x0005"``, ``"5"`` (hex, as in UFM's URLs) or 5 → 5, within (0x0, 0x7fff)."""
    if isinstance(value, bool):
        raise UfmError(400, f"pkey {value!r} is not a hexadecimal string")
    if isinstance(value, int):
        pkey = value
    elif isinstance(value, str) and _PKEY.match(value.strip()):
        pkey = int(value.strip(), 16)
    else:
        raise UfmError(400, f"pkey {value!r} is not a hexadecimal string between 0x0 and 0x7fff")
    if pkey == 0x7FFF:
        raise UfmError(400, "pkey 0x7fff is the management (Default) partition, which the console keeps")
    if not 0 < pkey < 0x7FFF:
        raise UfmError(400, f"pkey {value!r} is outside 0x0-0x7fff (exclusive)")
    return pkey


def ufm_pkey(pkey: int) -> str:
    """How UFM spells a P_Key as a key of its answers: ``0x5``."""
    return f"{pkey:#x}"


def parse_bool(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise UfmError(400, f"{name} must be true or false, got {value!r}")


@dataclass(frozen=True)
class GuidsRequest:
    """The body of ``POST``/``PUT /ufmRest/resources/pkeys``: which GUIDs, with which membership."""

    pkey: int
    members: dict[int, str]  # GUID → "full" | "limited", in the order sent
    ip_over_ib: bool
    index0: bool


def parse_guids_request(body: Any) -> GuidsRequest:
    """Validate an add/set body as UFM documents it (``membership`` or ``memberships``, not both)."""
    if not isinstance(body, Mapping):
        raise UfmError(400, "the request body must be a JSON object")
    pkey = parse_pkey(body.get("pkey"))
    guids = parse_guids(body.get("guids"))
    if "membership" in body and "memberships" in body:
        raise UfmError(400, "membership and memberships cannot both be sent")
    memberships = body.get("memberships")
    if memberships is None:
        memberships = [body.get("membership", "full")] * len(guids)
    if not isinstance(memberships, list) or len(memberships) != len(guids):
        raise UfmError(400, "memberships must list one of full/limited per GUID")
    for m in memberships:
        if m not in MEMBERSHIPS:
            raise UfmError(400, f"membership {m!r} is not full or limited")
    return GuidsRequest(
        pkey=pkey,
        members=dict(zip(guids, memberships, strict=True)),
        ip_over_ib=parse_bool(body, "ip_over_ib", True),
        index0=parse_bool(body, "index0", False),
    )


def pkey_body(
    name: str, ip_over_ib: bool, members: Iterable[tuple[int, str]], *, guids_data: bool, index0: bool = False
) -> dict[str, Any]:
    """One P_Key as UFM answers it; ``guids`` only with ``guids_data=true``. ``index0`` is the
    P_Key's (OpenSM's ``indx0`` flag applies to every member), so every GUID reports the same."""
    body: dict[str, Any] = {"partition": name, "ip_over_ib": ip_over_ib, "index0": index0}
    if guids_data:
        body["guids"] = [
            {"guid": ufm_guid(guid), "membership": membership, "index0": index0} for guid, membership in sorted(members)
        ]
    return body


def query_flag(value: str | None) -> bool:
    """``?guids_data=true`` (and the ``True`` Python clients send)."""
    return (value or "").strip().lower() in ("true", "1", "yes")
