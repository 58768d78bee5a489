"""The jobs of spark_jobs/ through run_job on a real local Spark and a real Redis: staged partials = reference.

One SparkSession for the module (see conftest); every test reads its staging back with Staging.read.
"""

from collections import Counter

import pytest
from spark_support import GLOBAL_STATES, TWEET_STATES, WORD_STATES, expected_fields

from txdag import TransactionAttempt
from txdag.analytics.tweets import tweet_partials
from txdag.commit.rejections import list_rejections
from txdag.errors import BatchReadError, ConfigError, StaleAttemptError
from txdag.spark.cli import run_main
from txdag.spark.runner import run_job
from txdag.spouts import SpoutContext
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.spouts.streams import StreamPartition, append_entries
from txdag.staging.store import Staging, stage_key
from txdag.topology.definition import JobSpec, State, StreamsSource

pytestmark = pytest.mark.integration

EDGE_TWEETS = [
    "", " ", "     ", "@", "#", "##x", "@a@b", "@x@y#z", "#a#b",
    "hello @bob, #fun! #fun! @bob.", "@bob @bob @bob #fun #fun",
    "tab\t@t\t#x @t\t#y", "new\nline @n\n#l\r\n", " leading @lead #lead", "trailing #trail @trail  ",
    "#a.b* @a.b+ #(x|y) #[z] #\\d $^ @a.b+ #a.b*", "#^ #$ @? @\\ #{1,2}",
    "ünïcødé @ñandú #日本 #😀 @😀", "@Case #case @case #CASE",
    "\u00a0@nbsp #nbsp\u3000#ideo", "@u:#v #w", "@u #v:#w", "a:b @:: #::",
]


def tweets_expectation(tweets):
    reference = tweet_partials(tweets)
    return {s.name: expected_fields(s, reference[s.name]) for s in TWEET_STATES}


def clients(redis_client):
    return {"redis_default": redis_client}


@pytest.mark.parametrize("tweets", [sample_tweets(300, seed=7), EDGE_TWEETS, EDGE_TWEETS * 3 + sample_tweets(40)],
                         ids=["sample", "edge-cases", "mixed-duplicates"])
def test_tweets_analytics_stages_the_reference_partials(spark, jobs, redis_client, tweets_spec, tweets):
    spec = tweets_spec(tweets)
    result = run_job(spec, jobs["tweets_analytics"].process, clients(redis_client), spark)
    expected = tweets_expectation(tweets)
    assert Staging(redis_client, spec.topology).read(spec.tx) == expected
    assert (result.batch_size, result.rejected) == (len(tweets), 0)
    assert result.partials == {name: len(fields) for name, fields in expected.items()}


def test_edge_cases_keep_tokens_verbatim(spark, jobs, redis_client, tweets_spec):
    """Spark's split takes a regex: the pattern is one literal space; tweet text is never a pattern."""
    spec = tweets_spec(EDGE_TWEETS)
    run_job(spec, jobs["tweets_analytics"].process, clients(redis_client), spark)
    staged = Staging(redis_client, spec.topology).read(spec.tx)
    for token in ("#a.b*", "#(x|y)", "#[z]", "#\\d", "#{1,2}", "@\\", "@a@b", "@x@y#z", "##x", "@", "#",
                  "#😀", "#nbsp\u3000#ideo", "@t\t#y", "@n\n#l\r\n", "@bob,", "@bob.", "@::"):
        assert token in staged["users"] or token in staged["hashtags"], token
    assert "\u00a0@nbsp" not in staged["users"], "only U+0020 separates tokens"
    assert staged["users"]["@bob"] == 1 and staged["hashtags"]["#fun"] == 1 and staged["hashtags"]["#fun!"] == 1
    assert staged["users_hashtags"]["@u:#v:#w"] == 1, "('@u', '#v:#w') alone: ('@u:#v', '#w') is not added to it"


def test_a_key_whose_first_field_holds_the_separator_is_a_rejection_named_by_state_txid_and_field(
    spark, jobs, redis_client, tweets_spec
):
    spec = tweets_spec(["@u:#v #w", "@u #v:#w", "@u:#v #w", "a:b @:: #::", "@ann #x"], txid=4)
    result = run_job(spec, jobs["tweets_analytics"].process, clients(redis_client), spark)
    staged = Staging(redis_client, spec.topology).read(spec.tx)
    assert staged["users_hashtags"] == {"@u:#v:#w": 1, "@ann:#x": 1}
    assert staged["users"] == {"@u:#v": 2, "@u": 1, "@::": 1, "@ann": 1}, "a state without a separator keeps them"
    assert (result.batch_size, result.rejected) == (5, 0), "the source entries themselves are read"
    rejected = list_rejections(redis_client, spec.topology)
    assert sorted(rejected) == ['key:users_hashtags:4:["@::","#::"]', 'key:users_hashtags:4:["@u:#v","#w"]']
    reason = rejected['key:users_hashtags:4:["@u:#v","#w"]']["reason"]
    assert reason.startswith("state 'users_hashtags' txid 4: key field 0 '@u:#v' of ('@u:#v', '#w') contains the "
                             "separator ':'")
    assert (rejected['key:users_hashtags:4:["@u:#v","#w"]']["txid"], rejected['key:users_hashtags:4:["@::","#::"]']
            ["attempt"]) == (4, 1)


def test_an_empty_batch_seals_every_state_with_no_partials(spark, jobs, redis_client, tweets_spec):
    spec = tweets_spec([])
    result = run_job(spec, jobs["tweets_analytics"].process, clients(redis_client), spark)
    assert Staging(redis_client, spec.topology).read(spec.tx) == {"users": {}, "hashtags": {}, "users_hashtags": {}}
    assert result.partials == {"users": 0, "hashtags": 0, "users_hashtags": 0}


@pytest.mark.parametrize("tweets", [sample_tweets(123, seed=1), [], ["", "x"]], ids=["sample", "empty", "blank"])
def test_global_count_stages_the_batch_size(spark, jobs, redis_client, tweets_spec, tweets):
    spec = tweets_spec(tweets, states=GLOBAL_STATES)
    run_job(spec, jobs["global_count"].process, clients(redis_client), spark)
    assert Staging(redis_client, spec.topology).read(spec.tx) == {"global_count": {"$GLOBAL$": len(tweets)}}


def test_word_count_over_two_stream_partitions(spark, jobs, redis_client, prefix):
    sentences = {f"{prefix}:s1": sample_sentences(80, seed=4) + ["", "  a  b ", "a\tb"],
                 f"{prefix}:s2": sample_sentences(50, seed=5) + ["#x.* a", "ünï a"]}
    for stream, values in sentences.items():
        append_entries(StreamPartition(stream, redis_client, stream), values)
    source = StreamsSource(tuple(sentences), opaque=False)
    metadata = source.build(SpoutContext(prefix, clients(redis_client))).initialize_transaction(1, None)
    spec = JobSpec(prefix, TransactionAttempt(1, 1), metadata, source, WORD_STATES)
    result = run_job(spec, jobs["word_count"].process, clients(redis_client), spark)
    words = Counter(w for values in sentences.values() for s in values for w in s.split(" ") if w)
    assert Staging(redis_client, prefix).read(spec.tx) == {"words": dict(words)}
    assert result.batch_size == sum(len(v) for v in sentences.values())


def test_a_non_utf8_tweet_is_a_listed_rejection_and_its_neighbours_count(spark, jobs, redis_client, tweets_spec):
    spec = tweets_spec(["@a #x", b"@bad #\xff\xfe", "@a #y"])
    result = run_job(spec, jobs["tweets_analytics"].process, clients(redis_client), spark)
    assert (result.batch_size, result.rejected) == (3, 1)  # entries covered: the rejected one too
    rejected = list_rejections(redis_client, spec.topology)
    assert list(rejected) == ["2"] and "not valid UTF-8" in rejected["2"]["reason"]
    assert (rejected["2"]["txid"], rejected["2"]["attempt"]) == (1, 1)
    assert Staging(redis_client, spec.topology).read(spec.tx) == tweets_expectation(["@a #x", "@a #y"])


def _unknown_state(b):
    return {"users": b.groupBy("id").count(), "nope": b.groupBy("id").count()}


def _too_many_keys(b):
    return {"users": b.groupBy("id").count(), "users_hashtags": b.groupBy("id", "partition", "value").count()}


def _text_value(b):
    return {"users": b.select("id", "value")}


def _not_a_dataframe(b):
    return {"users": [("@a", 1)]}


@pytest.mark.parametrize(("process", "match"), [
    (_unknown_state, r"process returned state 'nope', which the topology does not declare \(declared: \['hashtags"),
    (_too_many_keys, r"state 'users_hashtags' has key_fields=2, so its DataFrame needs 3 column\(s\).*got 4"),
    (_text_value, r"the last column 'value' of state 'users' is string, not a number"),
    (_not_a_dataframe, r"process returned a list for state 'users'; return a DataFrame"),
], ids=["unknown-state", "too-many-key-columns", "text-value", "not-a-dataframe"])
def test_bad_process_output_is_a_clear_error_and_nothing_is_staged(
    spark, redis_client, tweets_spec, prefix, process, match
):
    spec = tweets_spec(["@a #x"])
    with pytest.raises(ConfigError, match=match) as err:
        run_job(spec, process, clients(redis_client), spark)
    assert f"topology '{prefix}' txid 1 attempt 1" in str(err.value)
    assert redis_client.keys(f"{stage_key(prefix, spec.tx)}*") == []
    with pytest.raises(BatchReadError, match="no sealed staging"):
        Staging(redis_client, prefix).read(spec.tx)


def test_a_global_state_with_a_key_column_is_refused(spark, jobs, redis_client, tweets_spec):
    spec = tweets_spec(["a"], states=[State("global_count", key_fields=0)])
    with pytest.raises(ConfigError, match="key_fields=0, so its DataFrame needs 1 column"):
        run_job(spec, lambda b: {"global_count": b.groupBy("id").count()}, clients(redis_client), spark)


def test_main_runs_the_job_and_prints_the_summary(spark, jobs, redis_client, redis_url, tweets_spec, capsys):
    spec = tweets_spec(["@a #x", "@a"])
    env = {"TXDAG_REDIS_URLS": f'{{"redis_default": "{redis_url}"}}'}
    assert run_main(jobs["tweets_analytics"].process, ["--job", spec.to_json()], env) == 0
    out = capsys.readouterr().out
    assert f"topology={spec.topology} txid=1 attempt=1 batch=2 rejected=0 partials: users=1, hashtags=1" in out
    assert Staging(redis_client, spec.topology).read(spec.tx)["users"] == {"@a": 2}
    assert spark.sparkContext._jsc is not None, "main leaves a session it did not create running"


def test_main_without_redis_urls_fails_naming_the_txid_and_what_to_set(jobs, tweets_spec, capsys):
    spec = tweets_spec(["@a"])
    assert run_main(jobs["tweets_analytics"].process, ["--job", spec.to_json()], {}) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"txdag job failed: topology={spec.topology} txid=1 attempt=1: ConfigError: "
                          f"TXDAG_REDIS_URLS is not set")
    assert run_main(jobs["global_count"].process, ["--job", "{not json"], {}) == 1
    assert "txdag job failed: topology=? txid=? attempt=?: FormatVersionError" in capsys.readouterr().err


def test_a_job_of_a_fenced_off_attempt_stages_nothing(spark, jobs, redis_client, tweets_spec):
    """The zombie's Spark job: attempt 1 of txid 1 runs after a retry claimed attempt 2. Its executors' writes are
    refused (StaleAttemptError, naming the txid and both attempts) and no staging key of attempt 1 is left."""
    spec = tweets_spec(sample_tweets(50, seed=3))
    staging = Staging(redis_client, spec.topology)
    assert staging.claim(spec.tx, "run try 1") == "run try 1"
    assert staging.claim(TransactionAttempt(1, 2), "run try 2") == "run try 2"
    with pytest.raises(StaleAttemptError, match="txid 1 attempt 1: attempt 1 is stale: attempt 2 of its txid"):
        run_job(spec, jobs["tweets_analytics"].process, clients(redis_client), spark)
    assert redis_client.keys(f"txdag:stage:{{{spec.topology}}}:*") == []


def test_the_executors_stage_into_a_redis_cluster(spark, jobs, redis_client, redis_cluster, tweets_spec):
    """The states' Redis is a cluster (the source stays on one server): the executors open cluster clients from
    the driver's portable spec and write the staging in the topology's slot, fenced as on one server."""
    from dataclasses import replace

    from txdag.state.kv import make_client, parse_provider_config

    cluster = make_client(parse_provider_config("redis_cluster", redis_cluster.config()))
    tweets = sample_tweets(200, seed=5)
    spec = replace(tweets_spec(tweets), redis_conn_id="states")
    try:
        result = run_job(spec, jobs["tweets_analytics"].process, {"redis_default": redis_client, "states": cluster},
                         spark)
        assert Staging(cluster, spec.topology).read(spec.tx) == tweets_expectation(tweets)
        assert result.batch_size == len(tweets)
        assert not redis_client.exists(stage_key(spec.topology, spec.tx)), "nothing staged on the source's Redis"
    finally:
        for key in cluster.scan_iter(match=f"*{{{spec.topology}}}*"):
            cluster.delete(key)
        cluster.close()
