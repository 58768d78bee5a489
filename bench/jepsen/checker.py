"""The checker: what must hold of one schedule's history (see ``recorder.py`` for its shape). Pure: no server.

    state       the final states equal the ground truth of every tweet appended (txdag.analytics.tweets)
    coverage    the committed txids' batches cover the appended tweets exactly once, in txid order
    order       txids commit in txid order with no gap; the committed txid never goes backwards
    double      no txid committed twice: after its first COMMITTED, another COMMITTED only with a higher attempt
                (a replay of a committed txid, which must change nothing)
    stale       every sampled value is the ground truth as of some committed prefix (below)
    liveness    a commit within ``bound`` seconds after the last fault healed

A sample is read in one MULTI/EXEC between ``t0`` and ``t1``: per field, its value ``v`` and the txid ``x`` of the
batch in it (``{state}:txid``, which only the batch's commit writes). With the batches of the txids as committed:
``v`` must be the field's count through txid ``x`` exactly, batch ``x`` must hold the field, txid ``x - 1`` must
have committed and txid ``x`` begun its commit (COMMITTING) before ``t1`` (txdag.commit.phase: wait for ``x - 1``,
COMMITTING, the states, COMMITTED; so a write of ``x`` before those is a write out of turn), and every txid
committed before ``t0`` must be visible (``x`` at least the last of them holding the field). A stale attempt's
write breaks one of these: a value of another batch, of an uncommitted txid, or too early.
Commit times are the txids' first COMMITTED steps in ZooKeeper, written after their states (same clock).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tput.data import expected_counts

from txdag.analytics.tweets import STATES
from txdag.spouts.tweet_batches import check_metadata, missing_in
from txdag.zk.records import TxStatus

COMMITTED = TxStatus.COMMITTED.value  # a history step's status as recorded (the enum's value)
COMMITTING = TxStatus.COMMITTING.value
SLACK = 0.5  # seconds of the history's own clock readings (ZooKeeper's milliseconds, the sampler's reads)
CLOCK = 0.001  # seconds: two steps in ZooKeeper, each timed by its writer on this machine's clock before it wrote
Snapshot = dict[str, dict[str, list]]  # state -> field -> [value, txid]


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


def commit_times(history: dict[str, Any], status: str = COMMITTED) -> dict[int, float]:
    """txid -> the time of its first step of ``status`` (COMMITTED by default)."""
    out = {}
    for txid, rec in history["txids"].items():
        ats = [at for _, step, at, _ in rec["history"] if step == status]
        if ats:
            out[int(txid)] = min(ats)
    return out


def batch_deltas(history: dict[str, Any]) -> tuple[dict[int, dict[str, Counter]], list[Violation]]:
    """Per committed txid after the base, per state, field -> count its batch adds; and how the batches fail to
    cover the tweets appended (ids base.covered+1 .. the last) exactly once, in txid order."""
    tweets, first = history["tweets"]["texts"], history["tweets"]["first"]
    base, times = history["base"], commit_times(history)
    deltas: dict[int, dict[str, Counter]] = {}
    problems: list[Violation] = []
    expect_from = base["covered"] + 1
    for txid in sorted(t for t in times if t > base["committed"]):
        start, quantity = check_metadata(history["txids"][str(txid)]["metadata"])
        if start != expect_from:
            problems.append(Violation("coverage", f"txid {txid}'s batch starts at tweet {start}, not {expect_from}"))
        ids = [i for i in range(start, start + quantity) if i not in missing_in(
            history["txids"][str(txid)]["metadata"], start, quantity)]
        if len(ids) < quantity:
            problems.append(Violation("coverage", f"txid {txid} accepted tweets {quantity - len(ids)} missing"))
        outside = [i for i in ids if not first <= i < first + len(tweets)]
        if outside:
            problems.append(Violation("coverage", f"txid {txid}'s batch holds tweets {outside[:5]} never appended"))
        batch = [tweets[i - first] for i in ids if first <= i < first + len(tweets)]
        deltas[txid] = {s: Counter(c) for s, c in expected_counts(batch).items()}
        expect_from = start + quantity
    last = first + len(tweets) - 1
    if tweets and expect_from != last + 1:
        problems.append(Violation("coverage", f"the committed batches end at tweet {expect_from - 1}, the last "
                                              f"appended is {last}"))
    return deltas, problems


def check_state(history: dict[str, Any]) -> list[Violation]:
    want = expected_counts(history["tweets"]["texts"])
    problems = []
    for state in STATES:
        base = {f: v for f, (v, _) in history["base"]["states"].get(state, {}).items()}
        truth = Counter(base) + Counter(want[state])
        have = {f: v for f, (v, _) in history["final"].get(state, {}).items()}
        wrong = sorted(f for f in truth.keys() | have.keys() if truth.get(f) != have.get(f))
        if wrong:
            sample = ", ".join(f"{f}: expected {truth.get(f)}, got {have.get(f)}" for f in wrong[:5])
            problems.append(Violation("state", f"{state}: {len(wrong)} fields differ from the ground truth ({sample})"))
    return problems


def check_order(history: dict[str, Any]) -> list[Violation]:
    times, c0 = commit_times(history), history["base"]["committed"]
    problems = []
    committed = sorted(t for t in times if t > c0)
    if committed and committed != list(range(c0 + 1, committed[-1] + 1)):
        gaps = sorted(set(range(c0 + 1, committed[-1] + 1)) - set(committed))
        problems.append(Violation("order", f"txids {gaps} never committed while later ones did"))
    for a, b in zip(committed, committed[1:]):
        if times[b] <= times[a]:
            problems.append(Violation("order", f"txid {b} committed at {times[b]:.3f}, not after txid {a} "
                                               f"({times[a]:.3f})"))
    for txid, rec in history["txids"].items():  # txdag.commit.phase: txid x begins its commit once x - 1 committed
        x = int(txid)
        for attempt, status, at, _ in rec["history"]:
            if status == COMMITTING and x - 1 > c0 and at < times.get(x - 1, float("inf")) - CLOCK:
                problems.append(Violation("order", f"txid {x} (attempt {attempt}) began its commit at {at:.3f}, "
                                                   f"before txid {x - 1} committed ({times.get(x - 1)})"))
    seen = [c for _, c in history["committed"]]
    for (_, a), (tb, b) in zip(history["committed"], history["committed"][1:]):
        if b < a:
            problems.append(Violation("order", f"the committed txid went back from {a} to {b} at {tb:.3f}"))
    if seen and committed and seen[-1] != committed[-1]:
        problems.append(Violation("order", f"the topology's committed txid is {seen[-1]}, its last committed txid "
                                           f"{committed[-1]}"))
    return problems


def check_double(history: dict[str, Any]) -> list[Violation]:
    problems = []
    for txid, rec in sorted(history["txids"].items(), key=lambda kv: int(kv[0])):
        attempts = [attempt for attempt, status, _, _ in rec["history"] if status == COMMITTED]
        for earlier, later in zip(attempts, attempts[1:]):
            if later <= earlier:
                problems.append(Violation("double", f"txid {txid} COMMITTED by attempt {later} after attempt "
                                                    f"{earlier} had committed it"))
    return problems


def prefix_counts(history: dict[str, Any], deltas: dict[int, dict[str, Counter]]) -> dict[str, dict[str, dict]]:
    """state -> field -> {txid: the field's count through that txid}, for the committed txids whose batch holds
    the field (from the base's value)."""
    out: dict[str, dict[str, dict]] = {s: {} for s in STATES}
    for state in STATES:
        running = {f: v for f, (v, _) in history["base"]["states"].get(state, {}).items()}
        for txid in sorted(deltas):
            for field, n in deltas[txid][state].items():
                running[field] = running.get(field, 0) + n
                out[state].setdefault(field, {})[txid] = running[field]
    return out


def check_sample(sample: dict[str, Any], history: dict[str, Any], prefix: dict[str, dict[str, dict]],
                 times: dict[int, float]) -> list[str]:
    """What is wrong with one sample of the states (see the module's docstring), one line per field."""
    base, c0 = history["base"]["states"], history["base"]["committed"]
    begun = commit_times(history, COMMITTING)
    before = max([t for t, at in times.items() if at <= sample["t0"] - SLACK and t > c0], default=c0)
    wrong = []
    for state in STATES:
        got, was = sample["states"].get(state, {}), base.get(state, {})
        for field in sorted(set(got) | set(was) | set(prefix[state])):
            cums = prefix[state].get(field, {})
            due = max([x for x in cums if x <= before], default=None)  # the last committed write it must show
            if field not in got:
                if due is not None or field in was:
                    wrong.append(f"{state}[{field}] absent, txid {due or was[field][1]} had committed it")
                continue
            value, x = got[field]
            if x <= c0:
                if was.get(field) != [value, x]:
                    wrong.append(f"{state}[{field}] = {value} at txid {x}, the base holds {was.get(field)}")
            elif x not in cums:
                wrong.append(f"{state}[{field}] = {value} at txid {x}, whose committed batch does not hold it"
                             if x in times else f"{state}[{field}] = {value} at txid {x}, never committed")
            elif value != cums[x]:
                wrong.append(f"{state}[{field}] = {value} at txid {x}, the truth through txid {x} is {cums[x]}")
            elif x - 1 > c0 and times.get(x - 1, float("inf")) > sample["t1"] + SLACK:
                wrong.append(f"{state}[{field}] at txid {x} visible at {sample['t1']:.3f}, before txid {x - 1} "
                             f"committed ({times.get(x - 1)})")
            elif begun.get(x, float("inf")) > sample["t1"] + SLACK:
                wrong.append(f"{state}[{field}] at txid {x} visible at {sample['t1']:.3f}, before its commit began "
                             f"({begun.get(x)})")
            if due is not None and x < due:
                wrong.append(f"{state}[{field}] at txid {x}, but txid {due} had committed it before the read")
    return wrong


SAMPLE_EVERY = 20.0  # seconds: at least one sample of the states per this much of a schedule, else the sampler was
#                     not running (a thread that died checks nothing)


def check_samples(history: dict[str, Any], deltas: dict[int, dict[str, Counter]]) -> list[Violation]:
    """Every sample, and the final reading (taken once the runs had finished: every committed txid visible)."""
    prefix, times = prefix_counts(history, deltas), commit_times(history)
    problems = []
    if len(history["samples"]) < history["duration"] // SAMPLE_EVERY:
        problems.append(Violation("stale", f"only {len(history['samples'])} samples of the states were taken "
                                           f"(recorder errors {history.get('recorder_errors')}): nothing to check"))
    t0, t1 = history.get("final_at") or [history["ended"]] * 2  # a history kept before final_at was recorded
    final = {"t0": t0, "t1": t1, "states": history["final"]}
    for sample in [*history["samples"], final]:
        wrong = check_sample(sample, history, prefix, times)
        if wrong:
            problems.append(Violation("stale", f"sample at {sample['t0']:.3f}..{sample['t1']:.3f}: {len(wrong)} "
                                               f"fields wrong: " + "; ".join(wrong[:3])))
    return problems


def recovery_seconds(history: dict[str, Any]) -> float | None:
    """Seconds from the last fault's healing to the next commit; None when none followed."""
    healed = history.get("healed_at")
    if healed is None:
        return None
    after = [at for at in commit_times(history).values() if at > healed]
    return round(min(after) - healed, 1) if after else None


def check_liveness(history: dict[str, Any]) -> list[Violation]:
    problems = []
    if history.get("stuck"):  # the drain had to replay through the REST API: the pipeline did not heal by itself
        problems.append(Violation("liveness", f"the pipeline did not drain by itself: {history['stuck']}"))
    if history.get("healed_at") is None:
        return problems
    took, bound = recovery_seconds(history), history["bound"]
    if took is None:
        problems.append(Violation("liveness", f"no commit after the last fault healed (bound {bound:g} s)"))
    elif took > bound:
        problems.append(Violation("liveness", f"the first commit after the last fault healed took {took} s > "
                                              f"{bound:g} s"))
    return problems


def check(history: dict[str, Any]) -> list[Violation]:
    """Every violation of one schedule's history, in the order of the module's docstring."""
    deltas, coverage = batch_deltas(history)
    return (check_state(history) + coverage + check_order(history) + check_double(history)
            + check_samples(history, deltas) + check_liveness(history))
