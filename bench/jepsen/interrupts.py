"""The harness's signals: the first SIGTERM or Ctrl-C ends the run through its clean-up (the finally blocks that stop
what it started and delete the namespaces); the later ones are told and do not cut that clean-up short."""

from __future__ import annotations

import os
import signal


def arm() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, interrupted)


def interrupted(signum: int, _frame: object) -> None:
    shield()
    raise KeyboardInterrupt(f"signal {signum}")


def shield() -> None:
    """From here on a signal does not interrupt: the first statement of each clean-up. SIGTERM gets a handler, not
    SIG_IGN, which the stop scripts run next would inherit (a `timeout` in them could no longer end what it waits
    on); SIGINT is ignored, so that a second Ctrl-C, sent to the whole process group, does not end them either."""
    signal.signal(signal.SIGTERM, _told)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _told(signum: int, _frame: object) -> None:
    try:  # os.write, not print: a handler that prints while the clean-up prints raises (a reentrant write)
        os.write(2, f"jepsen: signal {signum} during the clean-up: it goes on (it stops what the run started)\n"
                    .encode())
    except OSError:  # stderr gone with its terminal: the clean-up matters more than the line
        pass
