"""The MAD helper's pipeline (console.fabric.diags.mad_pipeline.Pipeline) against a scripted umad
port: replies out of order, lost, late, failed, redirected. No lab: what ibsim cannot do (it
never loses a reply) is scripted here; tests/fabric/test_mad.py runs the same code on the lab.
Every test runs both loops: Python's and madpipe.c's (which calls the scripted port back)."""

from __future__ import annotations

import ctypes
import struct
import time
from collections import deque
from dataclasses import dataclass, field

import pytest

from console.fabric.diags import mad_ops, mad_pipeline
from console.fabric.diags import mad_wire as mw

HEADER = mw.USER_MAD_HEADER


@dataclass
class Sent:
    tid: int
    cls: int
    lid: int
    attr: int
    mod: int  # attribute modifier (SMP) or PortSelect (PMA)


class Fn:
    """A callable that takes attributes, like a ctypes function (``restype``, ``argtypes``)."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


@dataclass
class FakeUmad:
    """libibumad as the pipeline uses it. ``script(sent, attempt)`` says what happens to a MAD:
    "ok", "lose", "late" (answered once the next attempt is sent), ("umad", status) or ("mad",
    status); ``lifo`` answers the newest first."""

    script: object = None
    lifo: bool = False
    sent: list[Sent] = field(default_factory=list)
    queue: deque = field(default_factory=deque)
    received: int = 0
    max_outstanding: int = 0
    attempts: dict = field(default_factory=dict)
    held: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("umad_size", "umad_set_addr", "umad_send", "umad_recv"):
            setattr(self, name, Fn(getattr(self, "_" + name)))

    def _umad_size(self) -> int:
        return HEADER

    def _umad_set_addr(self, buf, lid, qp, sl, qkey) -> int:
        struct.pack_into(">IIH", buf, 20, qp, qkey, lid)
        return 0

    def _umad_send(self, portid, agent, buf, length, timeout_ms, retries) -> int:
        # (a ctypes buffer from the Python loop, an address from the C loop)
        raw = ctypes.string_at(buf, HEADER + mw.MAD_SIZE) if isinstance(buf, int) else bytes(buf)
        (lid,) = struct.unpack_from(">H", raw, 28)
        cls = raw[HEADER + 1]
        tid, attr, mod = struct.unpack_from(">QHxxI", raw, HEADER + 8)
        if cls == mw.PERF_CLASS:
            mod = raw[HEADER + mw.DATA_OFFSET + 1]
        one = Sent(tid & 0xFFFFFFFF, cls, lid, attr, mod)
        self.sent.append(one)
        key = (cls, lid, attr, mod)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        fate = self.script(one, self.attempts[key]) if self.script else "ok"
        if key in self.held:  # a "late" answer arrives behind the next attempt's MAD
            self.queue.append(self.held.pop(key))
        if fate == "late":
            self.held[key] = self._reply(one, "ok")
        elif fate != "lose":
            self.queue.append(self._reply(one, fate))
        # (sent and not yet received: exact while nothing is lost)
        self.max_outstanding = max(self.max_outstanding, len(self.sent) - self.received)
        return 0

    @staticmethod
    def _reply(one: Sent, fate) -> bytes:
        ustatus = fate[1] if isinstance(fate, tuple) and fate[0] == "umad" else 0
        mstatus = fate[1] if isinstance(fate, tuple) and fate[0] == "mad" else 0
        buf = bytearray(HEADER + mw.MAD_SIZE)
        struct.pack_into("=I", buf, 4, ustatus)
        struct.pack_into(
            ">BBBBHHQHHI", buf, HEADER, 1, one.cls, 1, 0x81, mstatus, 0, (7 << 32) | one.tid, one.attr, 0, one.mod
        )
        # the data says which query it answers
        struct.pack_into(">HHI", buf, HEADER + mw.DATA_OFFSET, one.lid, one.attr, one.mod)
        return bytes(buf)

    def _umad_recv(self, portid, buf, length_p, wait_ms) -> int:
        if not self.queue:
            time.sleep(wait_ms / 1000)
            if not self.queue:
                return -110
        reply = self.queue.pop() if self.lifo else self.queue.popleft()
        self.received += 1
        if isinstance(buf, int):
            ctypes.memmove(buf, reply, len(reply))
        else:
            buf[: len(reply)] = reply
        return 0


class FakeLib:
    """libibmad's port id and agents."""

    def __init__(self) -> None:
        self.mad_rpc_portid = Fn(lambda port: 3)
        self.mad_rpc_class_agent = Fn(lambda port, cls: {mw.SMI_CLASS: 0, mw.PERF_CLASS: 1}[cls])


class FakeMad:
    """The synchronous path, for redirected queries."""

    def __init__(self) -> None:
        self.lib = FakeLib()
        self.port = object()
        self.asked: list[mw.Query] = []

    def one(self, query: mw.Query) -> bytes:
        self.asked.append(query)
        return b"sync" + bytes(mw.DATA_SIZE - 4)


@pytest.fixture(params=[False, True], ids=["python", "native"])
def pipeline(request):
    """A Pipeline on a scripted umad port, running the Python loop or madpipe.c's (which must be
    built: scripts/bootstrap.sh)."""

    def make(fake: FakeUmad, **kw) -> mad_pipeline.Pipeline:
        pipe = mad_pipeline.Pipeline(FakeMad(), umad=fake, timeout_ms=20, native=request.param, **kw)  # type: ignore[arg-type]
        assert (pipe.native is not None) == request.param
        return pipe

    return make


def queries(lids=(5, 6, 7), ports=(1, 2, 3, 4)) -> list[mw.Query]:
    out: list[mw.Query] = []
    for lid in lids:
        for port in ports:
            out += [(mw.PERF_CLASS, lid, mw.ATTR_PORT_COUNTERS_EXT, port), (mw.SMI_CLASS, lid, mw.ATTR_PORT_INFO, port)]
    return out


def answered(data: bytes | None) -> tuple[int, int, int] | None:
    return None if data is None else struct.unpack_from(">HHI", data, 0)


def test_answers_come_back_in_request_order_whatever_order_the_replies_arrive_in(pipeline):
    fake = FakeUmad(lifo=True)
    qs = queries()
    stats = mw.Stats()
    out = pipeline(fake, window=8).query(qs, stats)
    assert [answered(a) for a in out] == [(lid, attr, mod) for _, lid, attr, mod in qs]
    assert stats.mads == len(qs) and stats.failed == stats.retried == 0
    assert fake.max_outstanding <= 8
    # interleaved over destinations: the first three MADs go to three different switches
    assert [s.lid for s in fake.sent[:3]] == [5, 6, 7]


def test_window_of_one_is_one_mad_at_a_time(pipeline):
    fake = FakeUmad()
    out = pipeline(fake, window=1).query(queries(), mw.Stats())
    assert all(a is not None for a in out)
    assert fake.max_outstanding == 1


def test_a_lost_reply_is_retried_and_a_late_reply_of_an_earlier_attempt_is_dropped(pipeline):
    lost = (mw.PERF_CLASS, 6, mw.ATTR_PORT_COUNTERS_EXT, 2)
    late = (mw.SMI_CLASS, 7, mw.ATTR_PORT_INFO, 3)

    def script(one: Sent, attempt: int):
        key = (one.cls, one.lid, one.attr, one.mod)
        return "lose" if key in (lost, late) and attempt == 1 else "ok"  # `late`: see below

    fake = FakeUmad(script=script)
    pipe = pipeline(fake, window=4)
    qs = queries()
    stats = mw.Stats()
    out = pipe.query(qs, stats)
    assert [answered(a) for a in out] == [(lid, attr, mod) for _, lid, attr, mod in qs]
    assert stats.retried == 2 and stats.failed == 0
    assert stats.mads == len(qs) + 2
    # the first attempt at `late` answers after all: not ours any more, the next batch ignores it
    first = next(s for s in fake.sent if (s.cls, s.lid, s.attr, s.mod) == late)
    fake.queue.append(FakeUmad._reply(first, "ok"))
    again = pipe.query(qs[:2], mw.Stats())
    assert [answered(a) for a in again] == [(lid, attr, mod) for _, lid, attr, mod in qs[:2]]


def test_an_answer_that_comes_after_its_retry_was_sent_is_not_taken_twice(pipeline):
    slow = (mw.PERF_CLASS, 5, mw.ATTR_PORT_COUNTERS_EXT, 3)

    def script(one: Sent, attempt: int):
        return "late" if (one.cls, one.lid, one.attr, one.mod) == slow and attempt == 1 else "ok"

    fake = FakeUmad(script=script)
    qs = queries()
    stats = mw.Stats()
    out = pipeline(fake, window=4).query(qs, stats)
    assert [answered(a) for a in out] == [(lid, attr, mod) for _, lid, attr, mod in qs]
    assert stats.retried == 1 and stats.failed == 0 and stats.mads == len(qs) + 1
    # both answers to `slow` were read, the first one dropped: the batch waited for the retry's
    assert not fake.queue and fake.received == len(qs) + 1


def test_a_mad_that_never_answers_is_null_after_its_retries_and_does_not_hold_up_the_rest(pipeline):
    dead = 6

    def script(one: Sent, attempt: int):
        return "lose" if one.lid == dead else "ok"

    fake = FakeUmad(script=script)
    qs = queries()
    stats = mw.Stats()
    out = pipeline(fake, window=16, retries=2).query(qs, stats)
    for q, a in zip(qs, out, strict=True):
        assert (a is None) == (q[1] == dead)
    per_lid = sum(1 for q in qs if q[1] == dead)
    assert stats.failed == per_lid and stats.retried == 2 * per_lid
    assert sum(1 for s in fake.sent if s.lid == dead) == 3 * per_lid


def test_umad_errors_are_retried_mad_errors_are_not_and_redirects_go_synchronous(pipeline):
    def script(one: Sent, attempt: int):
        if one.lid == 5 and one.mod == 1:
            return ("umad", 110) if attempt == 1 else "ok"  # a timeout status, then fine
        if one.lid == 6 and one.mod == 1:
            return ("mad", 0x1C)  # bad attribute/modifier: no retry
        if one.lid == 7 and one.mod == 1 and one.cls == mw.PERF_CLASS:
            return ("mad", mw.STATUS_REDIRECT)
        return "ok"

    fake = FakeUmad(script=script)
    pipe = pipeline(fake, window=8)
    qs = queries()
    stats = mw.Stats()
    out = pipe.query(qs, stats)
    by_query = dict(zip(qs, out, strict=True))
    assert answered(by_query[(mw.PERF_CLASS, 5, mw.ATTR_PORT_COUNTERS_EXT, 1)]) is not None
    assert by_query[(mw.PERF_CLASS, 6, mw.ATTR_PORT_COUNTERS_EXT, 1)] is None
    assert by_query[(mw.SMI_CLASS, 6, mw.ATTR_PORT_INFO, 1)] is None
    assert fake.attempts[(mw.PERF_CLASS, 6, mw.ATTR_PORT_COUNTERS_EXT, 1)] == 1
    redirected = (mw.PERF_CLASS, 7, mw.ATTR_PORT_COUNTERS_EXT, 1)
    assert by_query[redirected].startswith(b"sync")
    assert pipe.mad.asked == [redirected]
    assert stats.failed == 2 and stats.retried == 2


def test_the_ops_decode_the_same_answers_whichever_path_ran_them():
    ext = bytearray(mw.DATA_SIZE)
    struct.pack_into(">QQ", ext, 8, 1234, 5678)
    basic = bytearray(mw.DATA_SIZE)
    struct.pack_into(">H", basic, 4, 3)  # SymbolErrorCounter
    basic[6] = 2  # LinkErrorRecoveryCounter
    basic[7] = 1  # LinkDownedCounter
    struct.pack_into(">I", basic, 40, 70_000)  # PortXmitWait
    info = bytearray(mw.DATA_SIZE)
    info[32] = 0x44  # Active
    answers = {
        mw.ATTR_PORT_COUNTERS_EXT: bytes(ext),
        mw.ATTR_PORT_COUNTERS: bytes(basic),
        mw.ATTR_PORT_INFO: bytes(info),
    }

    def run(qs):
        return [None if q[1] == 99 else answers[q[2]] for q in qs]

    rows = mad_ops.counters(run, [[1, 1], [1, 2, mw.READ_DATA], [1, 3, mw.READ_ERRORS], [99, 1]])
    assert rows[0] == [
        1234,
        5678,
        {
            "SymbolErrorCounter": 3,
            "LinkErrorRecoveryCounter": 2,
            "LinkDownedCounter": 1,
            "PortRcvErrors": 0,
            "PortXmitDiscards": 0,
            "PortXmitWait": 70_000,
        },
        "Active",
    ]
    assert rows[1] == [1234, 5678, None, None]
    assert rows[2][:2] == [None, None] and rows[2][2]["SymbolErrorCounter"] == 3
    assert rows[2][3] is None
    assert rows[3] is None
