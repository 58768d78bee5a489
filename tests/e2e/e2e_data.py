"""The source data of the e2e topologies, loaded before Airflow starts so that each hourly/daily topology's
first scheduled run (created when the scheduler comes up) emits one batch; and the ground truth of each."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import redis

from txdag.analytics.tweets import tweet_partials
from txdag.spouts import StreamPartition, append_entries, append_tweets
from txdag.spouts.samples import sample_sentences, sample_tweets

EDGE_TWEETS = ["", "   ", "@", "#", "##x @a@b", "@ann! #go. #go", "@ann\t#tab @bob #x*y", "#ünï @çé #ünï"]
STREAMS = ("sentences:0", "sentences:1")
WARM_FAULT = "process:tweets_warm:2:1"  # warm mode (test_warm_spark): the job dies mid-batch inside the task
# Every fault point once, each in the first attempt of a txid (the process task's retry runs attempt 2);
# txids 4 and 5 of tweets_analytics process without a fault, so that their processing overlaps:
FAULTS = ",".join([
    "staged:tweets_analytics:1:1",  # the process task, after staging and marking PROCESSED
    "process:tweets_analytics:3:1",  # in the middle of the Spark job
    "committed:tweets_analytics:5:1",  # the commit task, after the commit record, before the cleanup
    "coordinate:word_count:2:1",  # the coordinate task, metadata written, the topology lock held
    "commit:word_count:3:1",  # the commit task, between the state write and the commit record
    "process:trending_hashtags:2:1",  # a window's batch: the Spark job dies mid-batch
    "commit:trending_hashtags:4:1",  # the commit task, after the window append, before the commit record
    "prepared:e2e_stateful:2:1",  # the commit task, key-value states prepared, none committed
    "commit:e2e_clears:1:1:3",  # the commit task's three tries (it retries twice at least): failed for good
    "commit:e2e_clears:3:1:3",
    "process:e2e_clears:4:1",
    "process:e2e_clears:5:1",
    "process:kafka_reemit:1:1",  # an opaque txid's first try dies; its retry reads another batch (test_kafka_source)
    "process:streams_back:1:1",  # an opaque txid's first try dies; a partition comes back before its retry
    "process:analytics_pg:1:1",  # PostgreSQL states (test_user_store): the Spark job dies mid-batch
    "commit:analytics_pg:2:1",  # after the database committed the txid, before ZooKeeper's record
    WARM_FAULT,
])


@dataclass
class Sources:
    tweets: list[str] = field(default_factory=list)
    sentences: dict[str, list[str]] = field(default_factory=dict)
    counted: list[str] = field(default_factory=list)  # global_count's tuples
    stateful: list[str] = field(default_factory=list)  # e2e_stateful's tweets (words)

    def tweets_truth(self) -> dict[str, Counter]:
        return tweet_partials(self.tweets)

    def trending_truth(self, batch: int, last: int, top: int) -> list[list]:
        """The ``top`` hashtags (once per tweet) of the ``last`` batches of ``batch`` tweets, by count then name."""
        batches = -(-len(self.tweets) // batch)
        window = self.tweets[max(0, batches - last) * batch:]
        counts = Counter(h for tweet in window for h in {t for t in tweet.split(" ") if t.startswith("#")})
        return sorted(([h, n] for h, n in counts.items()), key=lambda r: (-r[1], r[0]))[:top]

    def words_truth(self) -> Counter:
        return word_counts(self.sentences)


def word_counts(lines_by_stream: dict[str, list[str]]) -> Counter:
    """The words of every stream's sentences, counted (what the word-count job's state holds once drained)."""
    return Counter(w for lines in lines_by_stream.values() for line in lines for w in line.split(" ") if w)


def running_sum_truth(sentences: list[str], batch: int) -> tuple[Counter, int]:
    """running_counts.py's states after every txid of ``batch`` sentences: the word counts, and the sum over txids
    of each word's running count after its txid (for the words of that txid)."""
    words_of = [[w for w in s.split(" ") if w] for s in sentences]
    running: Counter = Counter()
    total = 0
    for first in range(0, len(sentences), batch):
        running.update(w for words in words_of[first:first + batch] for w in words)
        total += sum(running[w] for w in {w for words in words_of[first:first + batch] for w in words})
    return running, total


def load_sources(client: redis.Redis) -> Sources:
    """Flush the e2e database and load: 460 tweets (5 txids of <= 100), 2 x 200 sentences (5 txids of <= 40 per
    stream), 150 tuples for global_count (3 txids of <= 50; its backfill test tops them up to two txids waiting),
    120 sentences for e2e_stateful (3 txids of <= 40).
    The hourly topologies get 5 txids: one or two go to scheduled runs (two when the session crosses the hour),
    and at least three are left for manual runs, two at a time."""
    client.flushdb()
    sources = Sources(tweets=sample_tweets(452, seed=11) + EDGE_TWEETS)
    append_tweets(client, sources.tweets)
    for i, stream in enumerate(STREAMS):
        sources.sentences[stream] = sample_sentences(200, seed=20 + i)
        append_entries(StreamPartition(stream, client, stream), sources.sentences[stream])
    sources.counted = sample_sentences(150, seed=30)
    append_tweets(client, sources.counted, prefix="global_count:")
    sources.stateful = sample_sentences(120, seed=40)  # 3 txids of <= 40
    append_tweets(client, sources.stateful, prefix="stateful:")
    return sources
