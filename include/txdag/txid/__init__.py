"""txid rules and the coordinator: attempts, the pure decisions, ZooKeeper's compare-and-set, the report."""
