"""txdag's defaults, each defined here once and imported wherever it is used (the shell scripts spell the
connection ids again, in the AIRFLOW_CONN_<ID> variables of scripts/airflow.sh).

Airflow connection ids follow the providers' convention (``<type>_default``); the rest are what a topology gets
when its definition does not say otherwise.
"""

REDIS_CONN_ID = "redis_default"  # the states, the staging, the rejections and the tweets source
ZOOKEEPER_CONN_ID = "zookeeper_default"  # the txids' metadata (Storm's transactional.zookeeper.servers)
SPARK_CONN_ID = "spark_default"  # spark-submit (cold mode)
SPARK_CONNECT_CONN_ID = "spark_connect_default"  # a Spark Connect server (warm mode)

ZK_ROOT = "/txdag"  # the znode every topology's subtree hangs under (a connection's extra "root" overrides it)
ZK_TIMEOUT = 10.0  # seconds: the ZooKeeper session timeout (a connection's extra "timeout" overrides it)

KEEP_TXIDS = 100  # txids whose metadata ZooKeeper keeps (Storm's RotatingTransactionalState)
COMMIT_POKE_INTERVAL = 10.0  # seconds between a waiting commit's tries; shorter reschedules sometimes race the
#                              worker's exit (AIRFLOW-FACTS)
POOL_PREFIX = "txdag_"  # a topology's 1-slot pool is POOL_PREFIX + its topology id
