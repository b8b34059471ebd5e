"""How layers above the fabric tell it what to carry and learn what it verified.

The fabric layer is the wire: it knows partitions, QoS, ports and changes, not who asked for
them. A layer above (scheduling, for its reservations) registers here in its
``AppConfig.ready()``, which Django runs in every process (web, Celery worker, management
commands, tests), so the fabric never imports it:

- a *partitions provider* answers which partitions a fabric must carry for its owner
  (:class:`PartitionRequest` rows), read whenever desired state is built;
- a *validator* runs the fabric validation suite (telemetry's: it reads the forwarding tables
  and counters) for ``manage.py fabric validate``;
- a *change listener* hears that a change was verified on the wire (with the P_Keys present on
  their member ports) or failed / was rolled back. It runs inside the transaction that writes
  the change's outcome, so what it writes commits or rolls back with that outcome.

Registrations are keyed by name: registering the same name again replaces the entry, so a repeated
``ready()`` never registers twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, Protocol, TypedDict

from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError


class PartitionRequest(TypedDict):
    """A partition a layer above wants on the fabric (for scheduling: one per live reservation)."""

    reservation_id: int  # the owner's id, carried into desired state as ``reservation_id``
    tenant_id: int
    name: str  # e.g. "res-42"
    pkey: int  # 0x0001..0x7ffe, from the fabric's range, never reused while live
    sl: int  # the priority class's service level
    members: list[list[str]]  # [["0x0002c90300000101", "full"], …] HCA port GUIDs (and pod VFs' vGUIDs)
    # True: the owner holds SHARP trees for these members; a driver that can (ufm) verifies that
    # SHARP's Aggregation Manager has a SHARP reservation for this P_Key with exactly its GUIDs.
    sharp: NotRequired[bool]


class PartitionsProvider(Protocol):
    """Answers the partitions ``fabric_id`` must carry for its owner's live objects."""

    def __call__(self, fabric_id: int) -> list[PartitionRequest]: ...


class VerifiedListener(Protocol):
    """A change was verified: ``present_pkeys`` are on their member ports (Default excluded)."""

    def __call__(self, fabric_id: int, *, present_pkeys: set[int], change_id: int) -> None: ...


class FailedListener(Protocol):
    """A change failed or was rolled back; ``error`` says why."""

    def __call__(self, fabric_id: int, *, change_id: int, error: str) -> None: ...


@dataclass(frozen=True)
class ChangeListener:
    """What a layer above does when a change of a fabric ends."""

    on_verified: VerifiedListener
    on_failed: FailedListener


class Validator(Protocol):
    """Runs the validation suite over ``fabric_id`` now; answers the run (its API shape)."""

    def __call__(self, fabric_id: int, *, actor: Actor) -> dict[str, Any]: ...


@dataclass
class HookRegistry:
    """The registered providers and listeners, by name (insertion order is call order)."""

    partitions_providers: dict[str, PartitionsProvider]
    change_listeners: dict[str, ChangeListener]
    validators: dict[str, Validator] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> HookRegistry:
        """A registry with nothing registered (tests swap one in to stand in for scheduling)."""
        return cls(partitions_providers={}, change_listeners={})


registry = HookRegistry.empty()


def register_partitions_provider(name: str, provider: PartitionsProvider) -> None:
    """Register (or replace) the partitions provider called ``name``."""
    registry.partitions_providers[name] = provider


def register_change_listener(name: str, listener: ChangeListener) -> None:
    """Register (or replace) the change listener called ``name``."""
    registry.change_listeners[name] = listener


def register_validator(name: str, validator: Validator) -> None:
    """Register (or replace) the validation suite called ``name``."""
    registry.validators[name] = validator


def validate(fabric_id: int, *, actor: Actor) -> dict[str, Any]:
    """The registered validation suite's run over ``fabric_id``."""
    for validator in registry.validators.values():
        return validator(fabric_id, actor=actor)
    raise ConsoleError("no validation suite is installed (the telemetry app registers it)")


def requested_partitions(fabric_id: int) -> list[PartitionRequest]:
    """Every registered provider's partitions for ``fabric_id``, provider by provider."""
    return [request for provider in registry.partitions_providers.values() for request in provider(fabric_id)]


def notify_verified(fabric_id: int, *, present_pkeys: set[int], change_id: int) -> None:
    """Tell every listener that ``change_id`` was verified with ``present_pkeys`` on the wire."""
    for listener in registry.change_listeners.values():
        listener.on_verified(fabric_id, present_pkeys=set(present_pkeys), change_id=change_id)


def notify_failed(fabric_id: int, *, change_id: int, error: str) -> None:
    """Tell every listener that ``change_id`` failed or was rolled back."""
    for listener in registry.change_listeners.values():
        listener.on_failed(fabric_id, change_id=change_id, error=error)
