"""The per-txid protocol (coordinate, process, commit, fail) and its outcomes, shared by every driver."""

from txdag.protocol.outcomes import (
    CommitStepOutcome,
    CoordinateOutcome,
    Failed,
    Halted,
    OwnerChanged,
    Processed,
    ProcessOutcome,
    Refused,
    Superseded,
)
from txdag.protocol.runtime import ClientsRuntime, Runtime
from txdag.protocol.steps import Job, JobReport, commit, coordinate, fail, process
from txdag.txid.decisions import AlreadyCommitted, Busy, Committed, Emission, NotReady, SourceDown, Wait

__all__ = [
    "AlreadyCommitted", "Busy", "ClientsRuntime", "CommitStepOutcome", "Committed", "CoordinateOutcome", "Emission",
    "Failed", "Halted", "Job", "JobReport", "NotReady", "OwnerChanged", "ProcessOutcome", "Processed", "Refused",
    "Runtime", "SourceDown", "Superseded", "Wait", "commit", "coordinate", "fail", "process",
]
