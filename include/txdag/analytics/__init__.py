"""Reference implementations of the shipped topologies' processing, in plain Python.

They are the ground truth the tests compare the committed state with, and the processing of the in-process
runner; the Spark jobs compute the same partials with DataFrame operations.
"""
