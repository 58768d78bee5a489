"""txdag: Storm's transactional topologies and Trident state on Airflow, Spark, ZooKeeper and Redis.

The core (txids, metadata, state, spouts) imports neither Airflow nor Spark.
"""

from txdag.attempt import TransactionAttempt
from txdag.topology.topology import TransactionalTopology
from txdag.txid.backlog import Backlog

__all__ = ["Backlog", "TransactionAttempt", "TransactionalTopology"]
__version__ = "0.1.0"
