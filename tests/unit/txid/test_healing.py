"""The one table that tells a transient failure (replayed automatically) from one that will recur (fails at once):
every row, the Spark job's failures by what the job reported, and the backoff an operator is told."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from txdag.errors import (
    AccessDenied,
    BatchReadError,
    ConfigError,
    FormatVersionError,
    ServiceUnavailable,
    SourceUnavailable,
    StoreWentBackwards,
    TxidOrderError,
)
from txdag.txid.failure import JobFailed, error_name
from txdag.txid.healing import (
    KILLED,
    REFUSALS,
    TABLE,
    WRAPPERS,
    backoff,
    classify,
    classify_name,
    replaying,
    will_recur,
)


def named(name: str) -> BaseException:
    """An exception whose class has ``name`` (Airflow's and Spark's, without importing them here)."""
    return type(name, (Exception,), {})("x")


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_row_of_the_table_decides_by_the_class_name(name) -> None:
    transient, because = TABLE[name]
    verdict = classify(named(name))
    assert (verdict.transient, verdict.because) == (transient, because) and because


@pytest.mark.parametrize("exc, transient", [
    (ServiceUnavailable("Redis at 127.0.0.1:1 is unreachable"), True),
    (SourceUnavailable("partition s0 times out"), True),
    (redis.ConnectionError("refused"), True),
    (redis.TimeoutError("timed out"), True),
    (redis.exceptions.BusyLoadingError("loading"), True),
    (redis.exceptions.ReadOnlyError("failing over"), True),
    (ConnectionLoss(), True),
    (SessionExpiredError(), True),
    (KazooTimeoutError("no server"), True),
    (ConnectionRefusedError("refused"), True),
    (redis.exceptions.AuthenticationError("wrong password"), False),  # a ConnectionError that will not heal
    (AccessDenied("no permission for SCAN"), False),
    (ConfigError("no such connection"), False),
    (StoreWentBackwards("Redis restarted without its data"), False),
    (BatchReadError("key 506 missing"), False),
    (TxidOrderError(3, 5), False),
    (FormatVersionError("v 9"), False),
    (ValueError("bad row"), False),
    (ZeroDivisionError("the user's processing"), False),
])
def test_real_exceptions_are_classified_by_their_most_specific_class(exc, transient) -> None:
    assert classify(exc).transient is transient


def test_a_try_that_died_without_an_exception_was_killed_and_heals() -> None:
    assert classify(None) == KILLED and KILLED.transient


def test_a_spark_job_is_classified_by_what_the_job_reported() -> None:
    said = "ServiceUnavailable: Redis at 127.0.0.1:6391 is unreachable while staging"
    assert classify(JobFailed("m", error_name(said), said)).transient
    assert not classify(JobFailed("m", error_name("ValueError: bad row"), "ValueError: bad row")).transient
    assert classify(JobFailed("spark-submit failed with exit code 137", None, "Error code is: 137")) == KILLED


def test_spark_wrappers_are_classified_by_the_transient_error_they_carry() -> None:
    wrapped = "An exception was thrown from the Python worker.\nredis.exceptions.ConnectionError: Error 111"
    assert classify_name("PythonException", wrapped).because == TABLE["ConnectionError"][1]
    assert not classify_name("PythonException", "Traceback ...\nKeyError: 'user'").transient
    assert not classify_name("Py4JJavaError", "").transient
    assert classify_name("SparkConnectGrpcException", "").transient  # the Connect server itself is unreachable


SASL_REFUSED = ("An error occurred while calling o52.load.\n: java.util.concurrent.ExecutionException: "
                "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed: Invalid username "
                "or password\n\tat org.apache.kafka.common.internals.KafkaFutureImpl.wait(KafkaFutureImpl.java:165)")


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS - {"PythonException"}))
def test_kafka_refusing_the_connection_in_a_spark_read_will_recur_and_says_so(wrapper) -> None:
    verdict = classify_name(wrapper, SASL_REFUSED)
    assert verdict == classify(named("SaslAuthenticationException")) and not verdict.transient
    assert "sasl.username" in verdict.because
    timed_out_after = SASL_REFUSED + "\norg.apache.kafka.common.errors.TimeoutException: listing offsets"
    assert not classify_name(wrapper, timed_out_after).transient  # the refusal is the cause, not the timeout


def test_a_spark_connect_error_raised_in_the_task_is_classified_as_warm_modes_job_error() -> None:
    """pyspark.errors.exceptions.connect: every server error's class subclasses SparkConnectGrpcException."""
    grpc = type(named("SparkConnectGrpcException"))

    def server(name: str, text: str) -> BaseException:
        return type(name, (grpc,), {})(text)
    for exc in (server("PythonException", "Traceback ...\nKeyError: 'user'"),  # the user's code raised on an executor
                server("AnalysisException", "[UNRESOLVED_COLUMN] nope"), server("UnknownException", SASL_REFUSED),
                server("PythonException", "redis.exceptions.ConnectionError: Error 111"), grpc("")):
        assert classify(exc) == classify_name(type(exc).__name__, str(exc))
        assert classify(exc).transient is (type(exc).__name__ == "SparkConnectGrpcException"
                                           or "ConnectionError" in str(exc))
    assert classify(grpc("")).because == TABLE["SparkConnectGrpcException"][1]  # the server itself did not answer


JEPSEN_36003 = ("[RESPONSE_ALREADY_RECEIVED] INVALID_HANDLE.SESSION_NOT_FOUND on the server but responses were "
                "already received from it.")


def test_jepsen_36003_a_connect_server_restarted_mid_job_is_transient_and_the_txid_is_replayed() -> None:
    """bench/jepsen.py seed 36003: the Connect server SIGKILLed and started again while txid 9's job ran; the client
    raised PySparkRuntimeError naming the session the new server does not hold, and the txid failed for good
    ("will recur") with the topology wedged behind it. The retry opens the session again: it heals."""
    runtime = type("PySparkRuntimeError", (RuntimeError,), {})
    verdict = classify(runtime(JEPSEN_36003))
    assert verdict.transient and "restarted" in verdict.because
    said = f"PySparkRuntimeError: {JEPSEN_36003}"
    assert classify(JobFailed("m", error_name(said), said)) == verdict  # the same when the job reported it
    forgotten = runtime("[RESPONSE_ALREADY_RECEIVED] INVALID_HANDLE.OPERATION_NOT_FOUND on the server but ...")
    assert classify(forgotten) == verdict
    closed = runtime("[INVALID_HANDLE.SESSION_CLOSED] The handle 4f2a is invalid.")
    assert not classify(closed).transient  # a URL that pins a closed session's id gets it refused on every retry
    in_output = "PySparkRuntimeError: [CONTEXT_ONLY_VALID_ON_DRIVER] ...\nWARN TimeoutException: a heartbeat"
    assert not classify(JobFailed("m", error_name(in_output), in_output)).transient  # only a session lost heals
    # the same seed again, another timing: the server answered SESSION_CHANGED, the client closed itself, and the
    # error it fetched next said NO_ACTIVE_SESSION (pyspark/sql/connect/client/core.py, _handle_rpc_error, _stub)
    said = ("SparkConnectException: [NO_ACTIVE_SESSION] No active Spark session found. Please create a new Spark "
            "session before running the code.")
    assert classify(JobFailed("m", error_name(said), said)).transient
    connect_error = type("SparkConnectException", (Exception,), {})
    changed = connect_error("[INVALID_HANDLE.SESSION_CHANGED] The handle x is invalid")
    assert classify(changed).transient
    assert not classify(runtime("[CANNOT_CONVERT_TYPE] the user's column")).transient  # other runtime errors recur


def test_the_refusals_searched_in_a_wrappers_text_are_rows_that_will_recur() -> None:
    assert set(REFUSALS) == {"SaslAuthenticationException", "TopicAuthorizationException"}
    assert all(not TABLE[name][0] for name in REFUSALS)


def test_error_name_is_the_class_at_the_start_of_a_job_error_and_none_otherwise() -> None:
    assert error_name("BatchReadError: key '506' missing") == "BatchReadError"
    assert error_name("spark-submit failed before the job could say why: see the log") is None
    assert error_name(None) is None


def test_the_backoff_doubles_from_retry_delay_and_stops_at_max_retry_delay() -> None:
    first, cap = timedelta(seconds=5), timedelta(minutes=5)
    assert [backoff(first, cap, n).total_seconds() for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]
    assert backoff(timedelta(0), timedelta(0), 3) == timedelta(0)


def test_what_an_operator_reads_names_the_txid_the_try_the_time_and_the_cause() -> None:
    verdict = classify(ServiceUnavailable("down"))
    said = replaying("tweets", 33, 2, 60, "2026-11-27T03:04:05+00:00", verdict)
    assert said == ("topology 'tweets': replaying txid 33 automatically, try 3 of 61, next at "
                    "2026-11-27T03:04:05+00:00, because a service (Redis, ZooKeeper) was unreachable; nothing to do "
                    "unless the cause lasts")
    assert "this run's coordinate" in replaying("tweets", None, 1, 60, "T", verdict)
    assert will_recur("tweets", classify(ValueError("x"))) == (
        "not retried: the task raised ValueError: it will raise again on the same batch (topology 'tweets')")
