"""txdag: Storm's transactional topologies and Trident state on Airflow, Spark, ZooKeeper and Redis.

The core (txids, metadata, state, spouts) imports neither Airflow nor Spark.
"""

from txdag.attempt import TransactionAttempt
from txdag.topology.topology import TransactionalTopology

__all__ = ["TransactionAttempt", "TransactionalTopology"]
__version__ = "0.1.0"
