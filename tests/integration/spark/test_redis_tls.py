"""A Redis that serves TLS only, with a private CA and client certificates (issue 35 item 3): an Airflow Redis
connection with the Redis provider's ``ssl_*`` extras reaches it from the tasks (txdag.airflow.hooks.redis_url) and
from the Spark executors, which read the batch and stage the partials on clients of their own."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from spark_support import TWEET_STATES, expected_fields
from support.servers import TlsRedisServer

from txdag import TransactionAttempt
from txdag.airflow.hooks import redis_url
from txdag.analytics.tweets import tweet_partials
from txdag.errors import ConfigError, ServiceUnavailable
from txdag.redisio import client_from_url, redis_errors
from txdag.spark.runner import run_job
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, TweetsSource

pytestmark = pytest.mark.integration

CONN_ID = "redis_tls"


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory):
    server = TlsRedisServer(tmp_path_factory.mktemp("redis-tls"))
    server.start()
    yield server
    server.kill()


@pytest.fixture
def tls_connection(tls_redis, monkeypatch):
    """The connection as the Redis provider's form saves it: ssl on, the CA, the client certificate and key."""
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps({
        "conn_type": "redis", "host": "127.0.0.1", "port": tls_redis.port, "extra": {
            "db": 3, "ssl": True, "ssl_cert_reqs": "required", "ssl_ca_certs": str(tls_redis.ca),
            "ssl_certfile": str(tls_redis.cert), "ssl_keyfile": str(tls_redis.key), "ssl_check_hostname": True}}))
    return CONN_ID


def test_the_executors_read_and_stage_a_batch_over_tls_with_the_connections_certificates(
        spark, jobs, tls_redis, tls_connection, prefix):
    client = client_from_url(redis_url(tls_connection))
    try:
        assert client.ping() and client.connection_pool.connection_kwargs["db"] == 3
        tweets = sample_tweets(300, seed=11)
        ids = append_tweets(client, tweets, prefix=f"{prefix}:")
        source = TweetsSource(max_transaction_size=len(ids), prefix=f"{prefix}:")
        spec = JobSpec(prefix, TransactionAttempt(1, 1), {"v": 1, "from": ids[0], "quantity": len(ids)}, source,
                       tuple(TWEET_STATES))
        result = run_job(spec, jobs["tweets_analytics"].process, {"redis_default": client}, spark)
        reference = tweet_partials(tweets)
        assert Staging(client, prefix).read(spec.tx) == {s.name: expected_fields(s, reference[s.name])
                                                         for s in TWEET_STATES}
        assert (result.batch_size, result.rejected) == (len(tweets), 0)
    finally:
        client.close()


@pytest.mark.parametrize("query,error,said", [
    ("", ConfigError, "TLS failed while pinging (the server's certificate is not trusted: self-signed certificate in "
                      "certificate chain): check the Redis connection's TLS extras"),
    ("?ssl_ca_certs={ca}&ssl_certfile=/nowhere/c.pem&ssl_keyfile=/nowhere/c.key", ConfigError,
     "TLS failed while pinging (cannot read one of its files (ssl_ca_certs={ca}, ssl_certfile=/nowhere/c.pem, "
     "ssl_keyfile=/nowhere/c.key): No such file or directory): check the Redis connection's TLS extras"),
], ids=["no CA", "files missing"])
def test_a_tls_connection_without_the_right_extras_is_named_with_its_fix(tls_redis, query, error, said):
    """What the extras change: without the CA the server's certificate is not trusted (no retry mends it), a file
    that cannot be read is named, and without the client certificate the server ends the handshake."""
    query = query.format(ca=tls_redis.ca)
    client = client_from_url(f"rediss://127.0.0.1:{tls_redis.port}/0{query}", socket_connect_timeout=2,
                             socket_timeout=2)
    try:
        with pytest.raises(error) as refused, redis_errors(client, "pinging"):
            client.ping()
        assert str(refused.value).startswith(f"Redis at 127.0.0.1:{tls_redis.port}/0"), str(refused.value)
        assert said.format(ca=tls_redis.ca) in str(refused.value)
    finally:
        client.close()
    plain = client_from_url(f"redis://127.0.0.1:{tls_redis.port}/0", socket_connect_timeout=2, socket_timeout=2)
    try:
        with pytest.raises(ServiceUnavailable) as down, redis_errors(plain, "pinging"):  # no TLS: the server
            plain.ping()                                                                   # answers nothing readable
        assert "TLS" not in str(down.value)
    finally:
        plain.close()


def test_without_a_client_certificate_the_server_asks_for_one_or_ends_the_handshake(tls_redis):
    """TLS 1.3 finishes the client's side of the handshake before the server checks it: the server's alert
    (certificate required) or the end of the connection reaches the client first, by timing. Either is named."""
    client = client_from_url(f"rediss://127.0.0.1:{tls_redis.port}/0?ssl_ca_certs={tls_redis.ca}",
                             socket_connect_timeout=2, socket_timeout=2)
    try:
        with pytest.raises((ConfigError, ServiceUnavailable)) as refused, redis_errors(client, "pinging"):
            client.ping()
        said = str(refused.value)
        if isinstance(refused.value, ConfigError):
            assert "TLS failed while pinging (the server asks for a client certificate: give ssl_certfile and " \
                   "ssl_keyfile (TLSV13_ALERT_CERTIFICATE_REQUIRED))" in said, said
        else:
            assert "TLS ended: check that this port serves TLS (a plain Redis answers none), and as no client " \
                   "certificate is given: a server that asks for one and gets none ends the connection so" in said, said
    finally:
        client.close()


def test_tls_to_a_redis_that_speaks_none_says_to_check_the_port(redis_url):
    """``"ssl": true`` on a connection to a plain Redis: the handshake gets no answer, and the message says so."""
    address = urlsplit(redis_url)
    client = client_from_url(f"rediss://{address.hostname}:{address.port}/0", socket_connect_timeout=1,
                             socket_timeout=1)
    try:
        with pytest.raises(ServiceUnavailable) as down, redis_errors(client, "pinging"):
            client.ping()
        assert "TLS ended: check that this port serves TLS (a plain Redis answers none)" in str(down.value)
    finally:
        client.close()
