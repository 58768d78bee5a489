"""txdag.spark.runner's summary line: what a job did and where its time went, one line in the task log (no Spark)."""

import re

from txdag import TransactionAttempt
from txdag.spark.runner import JobResult, Timer


def test_the_summary_names_the_txid_and_its_steps_in_order():
    result = JobResult("t", TransactionAttempt(7, 2), 20_000, 3, {"users": 20, "pairs": 400},
                       {"read": 0.0514, "plan": 0.13, "stage": 0.61, "seal": 0.002})
    line = result.timed("connect", 0.025).timed("import", 0.3).summary()
    assert line.startswith("txdag job done: topology=t txid=7 attempt=2 batch=20000 rejected=3 partials: "
                           "users=20, pairs=400; timings: ")
    steps = re.findall(r"(\w+) ([0-9.]+) s", line.split("timings: ", 1)[1])
    assert steps == [("import", "0.300"), ("connect", "0.025"), ("read", "0.051"), ("plan", "0.130"),
                     ("stage", "0.610"), ("seal", "0.002")]
    assert result.timings == {"read": 0.0514, "plan": 0.13, "stage": 0.61, "seal": 0.002}, "timed() copies"


def test_a_result_without_timings_has_no_timings_part():
    assert JobResult("t", TransactionAttempt(1, 1), 0, 0).summary().endswith("partials: none")


def test_the_timer_charges_each_step_the_time_since_the_last():
    timer = Timer()
    timer.done("read")
    timer.done("plan")
    timer.done("read")  # a step done twice adds up
    assert list(timer.steps) == ["read", "plan"]
    assert all(seconds >= 0 for seconds in timer.steps.values())
