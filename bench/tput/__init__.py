"""The parts of bench/throughput.py: services, the bench DAG folder, drains, the baseline and the Spark peer, memory
sampling, the report. Not a public API: bench/throughput.py is the command."""
