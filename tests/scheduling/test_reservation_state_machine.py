"""A hypothesis state machine over book / cancel / release / extend / quota change, checking after
every step, in the database: no GPU booked twice in overlapping windows, no tenant above its quota
at any instant, and every holding reservation holding exactly its GPUs."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from console.tenancy.errors import ConsoleError
from console.tenancy.models import Tenant
from scheduling.models import Quota, Reservation, ReservationAllocation
from scheduling.services import lifecycle, quotas, reservations
from tests.scheduling.conftest import OPERATOR, SYSTEM, tenant_principal

pytestmark = pytest.mark.django_db


class Bookings(RuleBasedStateMachine):
    pool = None
    tenants: list[Tenant] = []

    def __init__(self) -> None:
        super().__init__()
        ReservationAllocation.objects.all().delete()
        Reservation.objects.all().delete()
        for tenant in self.tenants:
            quotas.set_quota(SYSTEM, OPERATOR, tenant=tenant, pool=self.pool, guaranteed_gpus=32, borrow_limit_gpus=32)
        self.base = timezone.now().replace(microsecond=0) + dt.timedelta(minutes=1)

    def _live(self) -> list[Reservation]:
        # with each one's tenant (the rules act as it) in the same query
        return list(Reservation.objects.live().select_related("tenant").order_by("pk"))

    @rule(
        who=st.integers(0, 1),
        size=st.sampled_from([("gpus", 2), ("gpus", 8), ("gpus", 16), ("nodes", 3), ("gpus", 40)]),
        offset_h=st.integers(0, 6),
        length_h=st.integers(1, 4),
        same_leaf=st.booleans(),
    )
    def book(self, who, size, offset_h, length_h, same_leaf):
        start = self.base + dt.timedelta(hours=offset_h)
        request = reservations.ReservationRequest(
            pool_id=self.pool.pk,
            **{size[0]: size[1]},
            start=start,
            end=start + dt.timedelta(hours=length_h),
            constraints={"same_leaf": same_leaf},
        )
        reservations.reserve(SYSTEM, tenant_principal(self.tenants[who]), request)

    @rule(pick=st.integers(0, 50), release=st.booleans())
    def end_one(self, pick, release):
        live = self._live()
        if not live:
            return
        reservation = live[pick % len(live)]
        action = lifecycle.release if release else lifecycle.cancel
        action(SYSTEM, tenant_principal(reservation.tenant), reservation)

    @rule(pick=st.integers(0, 50), hours=st.integers(1, 4))
    def extend(self, pick, hours):
        live = self._live()
        if not live:
            return
        reservation = live[pick % len(live)]
        try:
            lifecycle.extend(
                SYSTEM, tenant_principal(reservation.tenant), reservation, reservation.end + dt.timedelta(hours=hours)
            )
        except ConsoleError:
            pass  # booked or over quota: refused, nothing changed

    @rule(who=st.integers(0, 1), guaranteed=st.integers(0, 64), borrow=st.integers(0, 64))
    def change_quota(self, who, guaranteed, borrow):
        try:
            quotas.set_quota(
                SYSTEM,
                OPERATOR,
                tenant=self.tenants[who],
                pool=self.pool,
                guaranteed_gpus=guaranteed,
                borrow_limit_gpus=borrow,
            )
        except ConsoleError:
            pass  # below usage or over the pool: refused

    @invariant()
    def no_gpu_booked_twice(self):
        with connection.cursor() as cursor:
            cursor.execute(
                """SELECT count(*) FROM scheduling_reservationallocation a
                   JOIN scheduling_reservationallocation b
                     ON a.gpu_id = b.gpu_id AND a.id < b.id
                    AND a.start < b."end" AND b.start < a."end" """
            )
            assert cursor.fetchone()[0] == 0

    @invariant()
    def usage_never_exceeds_quota(self):
        # Checked after every step: two queries (every quota, every live reservation of the pool),
        # not two per tenant; the windows per tenant are the same ones.
        windows: dict[int, list[tuple[dt.datetime, dt.datetime, int]]] = {}
        for r in Reservation.objects.live().filter(pool=self.pool).only("tenant_id", "start", "end", "gpus"):
            windows.setdefault(r.tenant_id, []).append((r.start, r.end, r.gpus))
        for quota in Quota.objects.filter(pool=self.pool):
            assert quotas.peak_usage(windows.get(quota.tenant_id, [])) <= quota.limit_gpus

    @invariant()
    def holding_reservations_hold_exactly_their_gpus(self):
        # every live reservation's allocations in one more query, not one per reservation
        for reservation in Reservation.objects.live().prefetch_related("allocations").order_by("pk"):
            allocations = list(reservation.allocations.all())
            assert len(allocations) == reservation.gpus
            assert {(a.start, a.end) for a in allocations} == {(reservation.start, reservation.end)}


def test_bookings_state_machine(pool, tenant_a, tenant_b):
    Bookings.pool = pool
    Bookings.tenants = [tenant_a, tenant_b]
    run_state_machine_as_test(
        Bookings,
        settings=settings(
            max_examples=25,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
