"""txdag.spark.env: the Spark job's Redis URLs from TXDAG_REDIS_URLS (no Spark, no Redis needed)."""

import subprocess
import sys

import pytest

from txdag.errors import ConfigError
from txdag.spark.env import parse_redis_urls, redis_clients_from_env


def test_urls_of_the_needed_connections():
    text = '{"redis_default": "redis://127.0.0.1:1/0", "tweets": "redis://127.0.0.1:2/3", "other": "redis://x"}'
    assert parse_redis_urls(text, ["tweets", "redis_default", "tweets"]) == {
        "redis_default": "redis://127.0.0.1:1/0", "tweets": "redis://127.0.0.1:2/3"
    }


@pytest.mark.parametrize(("text", "match"), [
    (None, "TXDAG_REDIS_URLS is not set; set it to a JSON object"),
    ("  ", "TXDAG_REDIS_URLS is not set"),
    ("redis://127.0.0.1", "TXDAG_REDIS_URLS is not JSON"),
    ('["redis://127.0.0.1"]', "must be a JSON object of connection id -> Redis URL"),
    ('{"redis_default": "redis://h"}', r"no URL for connection\(s\) \['tweets'\]"),
])
def test_a_missing_or_bad_variable_says_what_to_set(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_redis_urls(text, ["redis_default", "tweets"])


def test_clients_are_bytes_mode_and_a_bad_url_does_not_leak_its_password():
    clients = redis_clients_from_env(["a"], {"TXDAG_REDIS_URLS": '{"a": "redis://127.0.0.1:7/2"}'})
    kwargs = clients["a"].connection_pool.connection_kwargs
    assert (kwargs["port"], kwargs["db"], kwargs.get("decode_responses", False)) == (7, 2, False)
    with pytest.raises(ConfigError, match="connection 'a' is not a Redis URL") as err:
        redis_clients_from_env(["a"], {"TXDAG_REDIS_URLS": '{"a": "http://u:s3cret@h"}'})
    assert "s3cret" not in str(err.value)


def test_the_env_module_does_not_import_pyspark():
    """Airflow builds the job's environment; it must not pay for (or need) a pyspark import."""
    code = "import sys, txdag.spark.env; print('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_the_kafka_configurations_of_the_sources_connections():
    from txdag.spark.env import kafka_configs_from_env

    assert kafka_configs_from_env([], {}) == {}  # a source without Kafka reads no variable
    text = '{"kafka_default": {"bootstrap.servers": "k:9092"}, "other": {}}'
    assert kafka_configs_from_env(["kafka_default"], {"TXDAG_KAFKA_CONFIGS": text}) == {
        "kafka_default": {"bootstrap.servers": "k:9092"}}
    with pytest.raises(ConfigError, match="TXDAG_KAFKA_CONFIGS is not set or not JSON"):
        kafka_configs_from_env(["kafka_default"], {})
    with pytest.raises(ConfigError, match=r"no configuration for Kafka connection\(s\) \['k2'\]"):
        kafka_configs_from_env(["k2"], {"TXDAG_KAFKA_CONFIGS": text})
