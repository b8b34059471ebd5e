"""What every BMC driver implements, and the error they raise."""

from __future__ import annotations

from typing import Protocol


class BmcError(RuntimeError):
    """The BMC could not be reached or refused the request."""


class BmcDriver(Protocol):
    """What power management asks of a BMC. ``status`` answers "on", "off" or the BMC's own word
    for a transition ("poweringon", …) in lower case."""

    def power_on(self) -> None: ...

    def graceful_off(self) -> None: ...

    def force_off(self) -> None: ...

    def status(self) -> str: ...
