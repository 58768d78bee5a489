"""A failed txid as an operator reads it: txdag's own one-line error first, then the ways out as commands.

``txdag status``/``show``, the transactions page, the coordinate task that refuses a new txid and the process task
that failed all say it the same way. Pure: no ZooKeeper, no Airflow, no Spark.
"""

from __future__ import annotations

import re

from txdag.attempt import TransactionAttempt
from txdag.errors import TxdagError

JOB_FAILED = "txdag job failed:"  # the line txdag.spark.cli prints last on stderr when a job fails
_JOB_LINE = re.compile(r"txdag job failed: topology=\S+ txid=\S+ attempt=\S+: (.*)")
_EXIT_CODE = re.compile(r"Error code is: (-?\d+)")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
SHIPPED = ("txdag", "redis", "async_timeout")  # what `txdag pyfiles` ships to executors without txdag
ACCEPT_MISSING = "txdag accept-missing"  # named by the spout's error for a hole it lets an operator accept
HEADLINE_MAX = 1000


class JobFailed(TxdagError):
    """The processing job of a TransactionAttempt failed; the message is txdag's, the cause (spark-submit's
    exception, with the driver's output) is chained behind it. ``job_error``: the class name of the exception the
    job reported (None: it reported none, its driver was killed); ``job_detail``: its text or the job's output, which
    txdag.txid.healing reads to tell a transient failure from one that will recur."""

    def __init__(self, message: str, job_error: str | None = None, job_detail: str = "") -> None:
        super().__init__(message)
        self.job_error, self.job_detail = job_error, job_detail


def error_name(said: str | None) -> str | None:
    """The exception's class name at the start of a job's error (``ValueError: bad row`` -> ``ValueError``)."""
    name = (said or "").split(":", 1)[0].strip()
    return name if name.isidentifier() else None


def job_line(output: str) -> str | None:
    """The job's own error in spark-submit's output (the last ``txdag job failed:`` line), without the line's
    ``topology= txid= attempt=`` prefix; None when the job printed none (it was killed, or never started)."""
    found = [line.strip() for line in output.splitlines() if JOB_FAILED in line]
    if not found:
        return None
    line = found[-1][found[-1].index(JOB_FAILED):]
    match = _JOB_LINE.match(line)
    return match.group(1) if match else line[len(JOB_FAILED):].strip()


def with_missing_module(error: str) -> str:
    """``error``'s first line, plus what to do when its text says a Python (an executor's, on a cluster) lacks a
    module txdag needs there; Spark's own first line only says that the Python worker raised."""
    first, *rest = error.splitlines() or [""]
    found = _NO_MODULE.search(error)
    if found is None:
        return error
    module = found.group(1).split(".")[0]
    if module in SHIPPED:
        fix = (f"the Python running the job has no {module!r}: on a cluster whose executors have no txdag, ship it "
               f"with `txdag pyfiles ZIP --python WORKERS_PYTHON` and the topology's spark_conf "
               f"{{\"spark.submit.pyFiles\": ZIP}}")
    elif module == "pyarrow":
        fix = "the executors' Python has no pyarrow: install it on every worker (the Python of spark.pyspark.python)"
    else:
        fix = f"the Python running the job has no {module!r}: install it there, or ship it with the job"
    return "\n".join([f"{first} ({fix})", *rest])


def job_failure(topology: str, tx: TransactionAttempt, what: str | None, output: str = "") -> str:
    """The message of a process task whose job failed: what the job said (``what``, e.g. from :func:`job_line`),
    or, when it said nothing, spark-submit's exit code and where its output is; then the way out."""
    if what is None:
        code = _EXIT_CODE.search(output)
        exit_code = f" with exit code {code.group(1)}" if code else ""
        what = (f"spark-submit failed{exit_code} before the job could say why (the driver was killed, ran out of "
                "memory, or did not start): its output is in this task's log")
    return (f"topology {topology!r} {tx}: the Spark job failed: {what}. A transient failure is replayed "
            f"automatically; one that will recur fails the txid: fix the cause, then replay: txdag replay {topology} "
            f"--from {tx.txid}")


def headline(error: str | None) -> str:
    """One line for an operator: txdag's own error (the job's line when a record from older txdag holds the whole
    spark-submit output), else the error's first line, at most HEADLINE_MAX characters."""
    text = (error or "").strip()
    said = job_line(text)
    if said is not None and "\n" in text:  # an older record: spark-submit's exception with the driver's output
        task = text.split(":", 1)[0] if text.split(":", 1)[0].endswith(" failed") else "the task failed"
        line = f"{task}: the Spark job failed: {said}"
    else:
        line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= HEADLINE_MAX else line[:HEADLINE_MAX - 1] + "…"


def ways_out(topology: str, txid: int, error: str | None) -> list[dict[str, str]]:
    """The commands that get a failed txid going again, each with when to use it. A hole in the source (the
    spout's error names txdag accept-missing) has three: restore and replay, accept the hole, start over."""
    replay = f"txdag replay {topology} --from {txid}"
    if ACCEPT_MISSING not in (error or ""):
        return [{"when": "fix the cause, then replay it and every later txid", "command": replay}]
    return [
        {"when": "restore the missing entries from a backup, then replay", "command": replay},
        {"when": "or accept them as missing (they become rejected entries of the txid) and replay",
         "command": f"{ACCEPT_MISSING} {topology} {txid} --confirm --replay"},
        {"when": "or start the topology over (its states are deleted, its source read again)",
         "command": f"txdag reset {topology} --confirm"},
    ]


def ways_out_text(ways: list[dict[str, str]]) -> str:
    """The ways out in one line, as a task's error message says them."""
    return "; ".join(f"{w['when']}: {w['command']}" for w in ways)
