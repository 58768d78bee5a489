"""Which failures heal by themselves: the one table that decides whether a failed try is replayed automatically.

Storm replays a failed batch "as many times as necessary" (seeds 000 and 003). txdag does it through Airflow's own
retries: a try that failed for a **transient** reason (a service unreachable or timing out, a process or Spark
driver killed, a heartbeat lost) is retried with a backoff that doubles from the topology's ``retry_delay`` up to its
``max_retry_delay``; each retry re-emits the txid (attempt + 1: the same batch for a transactional spout, the opaque
rules otherwise) and later txids wait for it, so no operator is needed once the cause has cleared. A failure that
**will recur** (the user's processing raised, a record the spout cannot read, a configuration error, a store that
went backwards) fails at once, without retries, with its error and its ways out.

A failure is classified by the names of its exception's classes, most specific first (``TABLE``); a Spark job's
failure by the exception its job reported (``JobFailed.job_error``), or as transient when the job could say nothing
(its driver was killed). Anything not in the table will recur. Pure: no Airflow, no Spark, no client library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Verdict:
    """Whether a failure heals by itself, and why, in a few words an operator reads after "because"."""

    transient: bool
    because: str


TRANSIENT, RECURS = True, False

# exception class name -> (transient?, because). Names, not classes: the core imports neither kazoo, Spark nor
# Airflow, and a job's exception reaches the task only as its name.
TABLE: dict[str, tuple[bool, str]] = {
    # txdag's own errors
    "ServiceUnavailable": (TRANSIENT, "a service (Redis, ZooKeeper) was unreachable"),
    "SourceUnavailable": (TRANSIENT, "a partition of the source could not be read"),
    "StoreWentBackwards": (RECURS, "a store or the source went backwards: the topology halts"),
    "AccessDenied": (RECURS, "Redis refused txdag's user (password or ACL)"),
    "ConfigError": (RECURS, "a configuration error"),
    "BatchReadError": (RECURS, "the source does not hold the batch's entries"),
    "TxidOrderError": (RECURS, "a txid went backwards in a state"),
    "FormatVersionError": (RECURS, "a record of an unknown format version"),
    # redis-py (the Redis server down, loading, failing over, or too slow)
    "ConnectionError": (TRANSIENT, "a connection failed"),
    "TimeoutError": (TRANSIENT, "a service timed out"),
    "BusyLoadingError": (TRANSIENT, "Redis was loading its data"),
    "ClusterDownError": (TRANSIENT, "the Redis Cluster was down"),
    "TryAgainError": (TRANSIENT, "the Redis Cluster was resharding"),
    "MasterDownError": (TRANSIENT, "a Redis master was down"),
    "ReadOnlyError": (TRANSIENT, "a Redis master was being failed over"),
    "AuthenticationError": (RECURS, "Redis refused the password"),
    "AuthorizationError": (RECURS, "Redis refused txdag's user"),
    "NoPermissionError": (RECURS, "Redis refused a command or key (ACL)"),
    # kazoo (ZooKeeper down, or the session lost)
    "ConnectionLoss": (TRANSIENT, "the ZooKeeper connection was lost"),
    "ConnectionClosedError": (TRANSIENT, "the ZooKeeper connection was closed"),
    "SessionExpiredError": (TRANSIENT, "the ZooKeeper session expired"),
    "OperationTimeoutError": (TRANSIENT, "ZooKeeper timed out"),
    "RequestTimeoutError": (TRANSIENT, "ZooKeeper timed out"),
    "KazooTimeoutError": (TRANSIENT, "ZooKeeper could not be reached in time"),
    # Kafka's Java client, in a job's Spark read (the broker down, a partition's leader moving)
    "TimeoutException": (TRANSIENT, "Kafka (or another service) timed out"),
    "NotLeaderOrFollowerException": (TRANSIENT, "a Kafka partition's leader was moving"),
    "LeaderNotAvailableException": (TRANSIENT, "a Kafka partition had no leader"),
    "NetworkException": (TRANSIENT, "the Kafka broker was unreachable"),
    "DisconnectException": (TRANSIENT, "the Kafka broker closed the connection"),
    # ... and refusing the Kafka connection's settings (they come wrapped by Spark: found in the wrapper's text)
    "SaslAuthenticationException": (RECURS, "Kafka refused the Kafka connection's credentials (SASL): give its "
                                            "extra the right sasl.username, sasl.password and sasl.mechanism"),
    "TopicAuthorizationException": (RECURS, "Kafka refused the Kafka connection's user access to the topic (ACL)"),
    # Spark Connect (the server down or restarting)
    "SparkConnectGrpcException": (TRANSIENT, "the Spark Connect server was unreachable"),
    "RetriesExceeded": (TRANSIENT, "the Spark Connect server did not answer"),
    # Airflow (a task that ran too long: a paused service, most often)
    "AirflowTaskTimeout": (TRANSIENT, "the task ran longer than its execution_timeout"),
    "AirflowTaskTerminated": (TRANSIENT, "the task was terminated"),
}
KILLED = Verdict(TRANSIENT, "the task's process or its Spark driver was killed, or its heartbeat was lost")
USER_ERROR = "the task raised {name}: it will raise again on the same batch"
# Spark's wrappers of an error raised on an executor or by the server (a Connect server's too): the cause is named
# in their text, a refusal of Kafka's before any transient error (a refusal is certain; a timeout may follow it)
WRAPPERS = frozenset({"PythonException", "Py4JJavaError", "SparkException", "SparkConnectGrpcException",
                      "UnknownException"})
# The Spark Connect client's own errors, transient only when their text names the session or operation lost with a
# server that restarted mid-job (it forgot them, or holds another session under the id: the client then closes
# itself and its next call says NO_ACTIVE_SESSION). The retry opens the session again (spark/connect.py). A session
# the server closed is not one of them: a URL that pins its id gets it refused on every retry.
CONNECT_CLIENT = frozenset({"PySparkRuntimeError", "SparkConnectException"})
SESSION_LOST = Verdict(TRANSIENT, "the Spark Connect server restarted mid-job (the session was lost)")
_SESSION_LOST = re.compile(r"INVALID_HANDLE\.(SESSION_NOT_FOUND|SESSION_CHANGED|OPERATION_NOT_FOUND)\b|"
                           r"\[NO_ACTIVE_SESSION\]")
REFUSALS = tuple(n for n, (t, _) in TABLE.items() if not t and n.endswith(("AuthenticationException",
                                                                           "AuthorizationException")))
_REFUSAL = re.compile(r"\b(" + "|".join(REFUSALS) + r")\b")
_TRANSIENT_NAME = re.compile(r"\b(" + "|".join(n for n, (t, _) in TABLE.items() if t) + r")\b")


def classify(exc: BaseException | None) -> Verdict:
    """The verdict on a failed try's exception (None: the try died without one, e.g. killed or its heartbeat
    lost). A Spark job's failure is classified by the job's own exception (``job_error``)."""
    if exc is None:
        return KILLED
    if hasattr(exc, "job_error"):  # txdag.txid.failure.JobFailed: the job's error, or None when it said nothing
        job_error = exc.job_error
        return KILLED if job_error is None else classify_name(job_error, getattr(exc, "job_detail", ""))
    mro = [cls.__name__ for cls in type(exc).__mro__]
    if (WRAPPERS | CONNECT_CLIENT).intersection(mro):  # a Spark error raised in this process (Spark Connect), as
        #                                                warm mode's job error
        return classify_name(mro[0], str(exc))
    row = next((TABLE[name] for name in mro if name in TABLE), None)
    return Verdict(*row) if row else Verdict(RECURS, USER_ERROR.format(name=mro[0]))


def classify_name(name: str, detail: str = "") -> Verdict:
    """The verdict on an exception known by its class name (a Spark job's, from its last line); for Spark's
    wrappers, by a refusal of Kafka's, else the first transient error, that ``detail`` (their text, the job's
    output) names; for the Connect client's errors, by a session lost that their text names."""
    if name in CONNECT_CLIENT and _SESSION_LOST.search(detail):
        return SESSION_LOST
    found = (_REFUSAL.search(detail) or _TRANSIENT_NAME.search(detail)) if name in WRAPPERS else None
    if found is not None:
        return Verdict(*TABLE[found.group(1)])
    if name in TABLE:
        return Verdict(*TABLE[name])
    return Verdict(RECURS, USER_ERROR.format(name=name))


def backoff(retry_delay: timedelta, max_retry_delay: timedelta, try_number: int) -> timedelta:
    """The wait before retry ``try_number + 1`` of a task whose try ``try_number`` failed: ``retry_delay``
    doubled per try, at most ``max_retry_delay`` (Airflow's exponential backoff adds up to a few seconds of
    jitter on top; this is the figure an operator is told)."""
    return min(retry_delay * 2 ** max(try_number - 1, 0), max_retry_delay)


def replaying(topology: str, txid: int | None, try_number: int, max_tries: int, next_at: str,
              verdict: Verdict) -> str:
    """The line the task log says while a transient failure is replayed automatically."""
    what = f"txid {txid}" if txid is not None else "this run's coordinate"
    return (f"topology {topology!r}: replaying {what} automatically, try {try_number + 1} of {max_tries + 1}, next "
            f"at {next_at}, because {verdict.because}; nothing to do unless the cause lasts")


def will_recur(topology: str, verdict: Verdict) -> str:
    """What a failure that will recur adds to its error: why it is not retried."""
    return f"not retried: {verdict.because} (topology {topology!r})"
