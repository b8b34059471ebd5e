"""The MAD wire format the helper speaks: classes, attributes, state names and struct layouts.

Shared by both ways the helper puts MADs on the wire (:mod:`console.fabric.diags.mad_sync`,
:mod:`console.fabric.diags.mad_pipeline`) and by the decoding of their answers
(:mod:`console.fabric.diags.mad_ops`). Standard library only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PERF_CLASS, SMI_CLASS = 0x04, 0x01
ATTR_PORT_COUNTERS, ATTR_PORT_COUNTERS_EXT = 0x12, 0x1D
ATTR_NODE_INFO, ATTR_PORT_INFO, ATTR_PKEY_TABLE = 0x11, 0x15, 0x16
ATTR_LFT, ATTR_SM_INFO = 0x19, 0x20
ATTR_SL2VL, ATTR_VLARB = 0x17, 0x18
NODE_TYPES = {1: "CA", 2: "Switch", 3: "Router"}
QP1_QKEY = 0x80010000
PORT_STATES = {1: "Down", 2: "Initialize", 3: "Armed", 4: "Active"}
PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}
ERROR_FIELDS = (  # (name, offset, size) in the PortCounters attribute
    ("SymbolErrorCounter", 4, 2),
    ("LinkErrorRecoveryCounter", 6, 1),
    ("LinkDownedCounter", 7, 1),
    ("PortRcvErrors", 8, 2),
    ("PortXmitDiscards", 14, 2),
    ("PortXmitWait", 40, 4),  # congestion: ticks a port had data to send but no credits
)
#: ``counters`` mask bits: what to read for a port.
READ_DATA, READ_ERRORS, READ_STATE = 1, 2, 4
READ_ALL = READ_DATA | READ_ERRORS | READ_STATE

METHOD_GET = 0x01
MAD_SIZE = 256  # a MAD on the wire
DATA_OFFSET = 64  # SMP (LID routed) and PMA attribute data start here in the MAD
DATA_SIZE = 64  # what the helper keeps of an answer (the sync path copies as much)
STATUS_REDIRECT = 0x0002
DEFAULT_WINDOW = 32
DEFAULT_TIMEOUT_MS = 200
DEFAULT_RETRIES = 1
USER_MAD_HEADER = 64  # sizeof(struct ib_user_mad) of the umad ABI (version 5)

#: One MAD to send: (management class, LID, attribute id, attribute modifier). For the PMA
#: (class 0x04) the "modifier" is the port, sent as PortSelect in the data as pma_query_via does.
Query = tuple[int, int, int, int]


@dataclass
class Stats:
    """What one request cost on the wire."""

    mode: str = "sync"
    mads: int = 0
    retried: int = 0
    failed: int = 0
    seconds: float = 0.0
    native: bool = False  # the pipelined MADs went through madpipe.c's loop

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "mads": self.mads,
            "retried": self.retried,
            "failed": self.failed,
            "seconds": round(self.seconds, 6),
            "native": self.native,
        }


# The umad header (struct ib_user_mad, ABI 5) from the address's LID (offset 28) on, then the MAD
# header: zeroes up to the MAD (sl, path bits, GRH, P_Key index: all 0), base version 1, class,
# class version 1, method, status, class specific, transaction ID, attribute id, reserved,
# modifier; the PMA's request data carries PortSelect in its second byte (pma_query_via).
LID_AT = 28
SMP_OUT = struct.Struct(">H34xBBBBHHQHHI")
PMA_OUT = struct.Struct(">H34xBBBBHHQHHI40xBB")
REPLY_STATUS = struct.Struct("=I")  # umad status (host order) at offset 4
REPLY_MAD = struct.Struct(">xBxBH6xI")  # class, method, MAD status, TID low 32 bits
