"""txdag's defaults, each defined here once and imported wherever it is used (the shell scripts spell the
connection ids again, in the AIRFLOW_CONN_<ID> variables of scripts/airflow.sh).

Airflow connection ids follow the providers' convention (``<type>_default``); the rest are what a topology gets
when its definition does not say otherwise.
"""

from datetime import timedelta

REDIS_CONN_ID = "redis_default"  # the states, the staging, the rejections and the tweets source
ZOOKEEPER_CONN_ID = "zookeeper_default"  # the txids' metadata (Storm's transactional.zookeeper.servers)
SPARK_CONN_ID = "spark_default"  # spark-submit (cold mode)
SPARK_CONNECT_CONN_ID = "spark_connect_default"  # a Spark Connect server (warm mode)

ZK_ROOT = "/txdag"  # the znode every topology's subtree hangs under (a connection's extra "root" overrides it)
ZK_TIMEOUT = 10.0  # seconds: the ZooKeeper session timeout (a connection's extra "timeout" overrides it): a
#                     ZooKeeper restart within it keeps the session; 2.5 times the server's tickTime (2 s) or more
REDIS_TIMEOUT = 10.0  # seconds for each connect and reply of the tasks' and Spark jobs' Redis clients (a URL's
#                       socket_timeout wins): a hung or cut-off Redis fails the task, whose retry goes on, instead
#                       of wedging it; twice Redis's own busy-script limit (5 s), so no healthy reply takes longer

KEEP_TXIDS = 100  # txids whose metadata ZooKeeper keeps (Storm's RotatingTransactionalState)
COMMIT_POKE_INTERVAL = 10.0  # seconds between a waiting commit's tries; shorter reschedules sometimes race the
#                              worker's exit (AIRFLOW-FACTS)
EXECUTION_TIMEOUT = timedelta(minutes=30)  # a task try still running after this (a hung, not a dead, job or
#                                          service: heartbeats cover the dead) fails and is retried; far above a
#                                          batch's normal time, so only a hang reaches it (a topology's own wins)
RETRIES = 60  # tries a transient failure gets (txdag.txid.healing), its waits doubling from RETRY_DELAY up to
#              MAX_RETRY_DELAY: about 4.5 hours of outage; a failure that will recur gets none
RETRY_DELAY = timedelta(seconds=5)  # the first wait: a single crash costs one retry, well within Storm's 30 s
MAX_RETRY_DELAY = timedelta(minutes=5)  # the longest wait: a cleared cause is noticed within 5 minutes
POOL_PREFIX = "txdag_"  # a topology's 1-slot pool is POOL_PREFIX + its topology id
