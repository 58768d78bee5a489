"""The commit path: one txid's staged outputs applied to the states, in txid order, each step idempotent."""
