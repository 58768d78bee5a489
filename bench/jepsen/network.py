"""Network namespaces for the fault harness: each server (and the harness itself) on an address of its own, so that
the nemesis can cut and heal the links between any two of them, both ways or one way.

The plan (``ip`` only: this machine has no iptables, nft or netem)::

    txj-hub        a bridge br0; one veth end per node (txjp-<node>) is its port
    txj-<node>     the other end (txjv-<node>) with 127.81.0.<K>/24; route_localnet on; the local table keeps only
                   127.0.0.1 (else every 127.x would be the namespace's own), so 127.81.0.x goes out on the veth

    harness 127.81.0.1 (recorder, workload, nemesis)    redis 127.81.0.2    zk 127.81.0.3    connect 127.81.0.4
    airflow 127.81.0.5 (api-server, scheduler and its LocalExecutor workers and their Spark drivers, triggerer,
                        dag-processor, and PostgreSQL)

A cut of a -> b is a permanent neighbour entry in a's namespace that gives b's address a MAC no port has (DEAD_MAC):
a's packets to b leave, the bridge floods them, nobody takes them, and a's connections time out as in a real
partition (both ways: also b -> a); a heal deletes the entry, and the next packet resolves b again. (A blackhole
route does not do: the sender's own packets fail at once with EINVAL, a refusal rather than a cut: measured.)
Only 127.81.0.0/24 addresses are ever targeted; the root namespace's routing is never touched (it cannot reach
127.81.0.x: its local table owns 127/8, so the harness runs in txj-harness). Signals are not namespaced: the
nemesis's pauses and kills work across namespaces. Needs root and ``ip netns``; ``teardown`` (also run before
``create``, for a run killed before) deletes every ``txj-*`` namespace and any leftover ``txj`` veth. The names are
the machine's: one run at a time holds them (``claim``, a lock file); a second run is refused, not given them (its
``create`` would SIGKILL the first one's servers as leftovers).
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from recov import procs

SUBNET = ipaddress.ip_network("127.81.0.0/24")
NODES = {"harness": 1, "redis": 2, "zk": 3, "connect": 4, "airflow": 5}
PREFIX = "txj-"
HUB, BRIDGE = "txj-hub", "br0"
LOCK = Path("/run/lock/txdag-jepsen-netns.lock")  # the namespace names are the machine's, not a checkout's
DEAD_MAC = "02:00:00:00:00:00"  # locally administered, on no interface: frames to it are dropped unseen
# What each node runs: the environment variable of the address the scripts bind to or connect to.
HOST_VARS = {"TXDAG_REDIS_HOST": "redis", "TXDAG_ZK_HOST": "zk", "TXDAG_SPARK_CONNECT_HOST": "connect",
             "TXDAG_AIRFLOW_HOST": "airflow", "TXDAG_PG_HOST": "airflow"}
# bench/tput/services.Stack's script services -> the node whose namespace runs them.
SERVICE_NODES = {"redis": "redis", "zk": "zk", "spark-connect": "connect", "airflow": "airflow",
                 "postgres": "airflow"}

Command = list[str]


class NetworkError(RuntimeError):
    """The namespaces cannot be built or changed: says what to do."""


def netns(node: str) -> str:
    _known(node)
    return PREFIX + node


def address(node: str) -> str:
    _known(node)
    return str(SUBNET.network_address + NODES[node])


def exec_prefix(node: str) -> Command:
    """What runs a command in ``node``'s namespace."""
    return ["ip", "netns", "exec", netns(node)]


def host_env() -> dict[str, str]:
    """The scripts' TXDAG_*_HOST variables for the plan."""
    return {var: address(node) for var, node in HOST_VARS.items()}


def _known(node: str) -> None:
    if node not in NODES:
        raise ValueError(f"unknown node {node!r}: use one of {', '.join(NODES)}")


def _targeted(addr: str) -> str:
    if ipaddress.ip_address(addr) not in SUBNET or addr == str(SUBNET.network_address):
        raise NetworkError(f"{addr} is not a node address in {SUBNET}: the harness targets no other address")
    return addr


# --- the plan: lists of `ip` commands, pure -----------------------------------------------------------------------

def create_commands(nodes: Sequence[str] = tuple(NODES)) -> list[Command]:
    cmds: list[Command] = [["ip", "netns", "add", HUB], ["ip", "-n", HUB, "link", "add", BRIDGE, "type", "bridge"],
                           ["ip", "-n", HUB, "link", "set", BRIDGE, "up"], ["ip", "-n", HUB, "link", "set", "lo", "up"]]
    for node in nodes:
        ns, inner, outer = netns(node), f"txjv-{node}", f"txjp-{node}"
        cmds += [["ip", "netns", "add", ns], ["ip", "link", "add", inner, "type", "veth", "peer", "name", outer],
                 ["ip", "link", "set", inner, "netns", ns], ["ip", "link", "set", outer, "netns", HUB],
                 ["ip", "-n", HUB, "link", "set", outer, "master", BRIDGE],
                 ["ip", "-n", HUB, "link", "set", outer, "up"],
                 ["ip", "-n", ns, "link", "set", "lo", "up"],
                 ["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1",
                  f"net.ipv4.conf.{inner}.route_localnet=1"],
                 ["ip", "-n", ns, "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local"],
                 ["ip", "-n", ns, "route", "replace", "local", "127.0.0.1", "dev", "lo", "table", "local"],
                 ["ip", "-n", ns, "addr", "add", f"{_targeted(address(node))}/{SUBNET.prefixlen}", "dev", inner],
                 ["ip", "-n", ns, "link", "set", inner, "up"]]
    return cmds


def teardown_commands(netns_list: str, root_links: str) -> list[Command]:
    """From ``ip netns list`` and ``ip -o link show`` (root namespace): delete every txj-* namespace, then every
    txj veth left in the root namespace (a create that stopped half-way)."""
    names = [line.split()[0] for line in netns_list.splitlines() if line.strip()]
    links = [line.split(":")[1].strip().split("@")[0] for line in root_links.splitlines() if line.count(":") >= 2]
    return ([["ip", "netns", "del", n] for n in names if n.startswith(PREFIX)]
            + [["ip", "link", "del", n] for n in links if n.startswith(("txjv-", "txjp-"))])


def cut_commands(a: str, b: str, one_way: bool, *, heal: bool = False) -> list[Command]:
    """Dead neighbour entries for a -> b (and b -> a unless ``one_way``); ``heal`` deletes them."""
    if a == b:
        raise ValueError(f"a link needs two nodes, got {a} twice")
    pairs = [(a, b)] if one_way else [(a, b), (b, a)]
    if heal:
        return [["ip", "-n", netns(x), "neigh", "del", _targeted(address(y)), "dev", f"txjv-{x}"] for x, y in pairs]
    return [["ip", "-n", netns(x), "neigh", "replace", _targeted(address(y)), "lladdr", DEAD_MAC, "dev", f"txjv-{x}",
             "nud", "permanent"] for x, y in pairs]


def dead_neighbours(node: str, neighbours: str) -> list[Command]:
    """From ``ip -n NS neigh show nud permanent``: the commands that delete each dead entry (a heal of all)."""
    out = []
    for line in neighbours.splitlines():
        words = line.split()
        if DEAD_MAC in words and words:
            out.append(["ip", "-n", netns(node), "neigh", "del", _targeted(words[0]), "dev", f"txjv-{node}"])
    return out


# --- carrying it out ----------------------------------------------------------------------------------------------

Runner = Callable[[Command], str]


def run_ip(cmd: Command) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise NetworkError(f"`{' '.join(cmd)}` exited {done.returncode}: {done.stderr.strip()[:300]}")
    return done.stdout


def preflight() -> None:
    """A clear error when the plan cannot run here."""
    if shutil.which("ip") is None:
        raise NetworkError("no `ip` command (iproute2): install it, or run with --no-network (pauses and kills only)")
    if os.geteuid() != 0:
        raise NetworkError("network namespaces need root: run as root (sudo -E), or with --no-network")
    try:
        run_ip(["ip", "netns", "list"])
    except NetworkError as exc:
        raise NetworkError(f"`ip netns` does not work here ({exc}): run with --no-network") from exc


def claim(path: Path = LOCK) -> IO[str]:
    """Holds the namespaces for this run: an exclusive lock on ``path``, released once every process holding the
    file has closed it or ended (the harness inside txj-harness holds it too: ``pass_fds``); NetworkError naming the
    holder when another run holds them."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.open("a+")
    except OSError as exc:
        raise NetworkError(f"cannot open the lock {path} that keeps two runs off one set of namespaces: {exc}; "
                           "run as root, or with --no-network") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "a process"
        lock.close()
        raise NetworkError(f"another jepsen run ({holder}) holds the network namespaces {PREFIX}*: wait for it to "
                           "end, or stop it (kill -TERM the first pid named, or the harness pid once that one is "
                           "gone: its clean-up stops its servers), or run this one with --no-network and other "
                           "TXDAG_*_PORTs (its servers and Airflow home are named by them)") from None
    note_holder(lock, "")
    return lock


def note_holder(lock: IO[str], more: str) -> None:
    """Who holds ``lock``, for the refusal of a second run: this process, since when, ``more``."""
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()}{', ' + more if more else ''}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    lock.flush()


@dataclass
class Network:
    """The namespaces of one run. ``run`` carries out one command (tests give a fake)."""

    nodes: tuple[str, ...] = tuple(NODES)
    run: Runner = run_ip

    def create(self) -> None:
        """Builds the namespaces; call it holding ``claim``: what is still in them is a dead run's."""
        if left := self.stop_leftovers():  # an earlier run killed before its clean-up: its servers hold the ports
            print(f"jepsen: SIGKILL to what an earlier run left in the namespaces: {left}", flush=True)
        self.teardown()
        try:
            for cmd in create_commands(self.nodes):
                self.run(cmd)
        except NetworkError:
            self.teardown()
            raise

    def teardown(self) -> list[Command]:
        cmds = teardown_commands(self.run(["ip", "netns", "list"]), self.run(["ip", "-o", "link", "show"]))
        for cmd in cmds:
            try:
                self.run(cmd)
            except NetworkError:  # a veth already gone with its namespace's peer
                pass
        return cmds

    def cut(self, a: str, b: str, one_way: bool) -> None:
        for cmd in cut_commands(a, b, one_way):
            self.run(cmd)

    def heal(self, a: str, b: str, one_way: bool) -> None:
        for cmd in cut_commands(a, b, one_way, heal=True):
            self.run(cmd)

    def heal_all(self) -> list[Command]:
        """Deletes every dead neighbour entry in the nodes' namespaces (what cuts a run interrupted left)."""
        cmds = [c for n in self.nodes for c in dead_neighbours(n, self.run(
            ["ip", "-n", netns(n), "neigh", "show", "nud", "permanent"]))]
        for cmd in cmds:
            self.run(cmd)
        return cmds

    def leftovers(self) -> dict[str, list[int]]:
        """Processes still in a txj-* namespace (``ip netns pids``): what a run that did not stop its servers left."""
        out = {}
        for line in self.run(["ip", "netns", "list"]).splitlines():
            name = line.split()[0] if line.strip() else ""
            if name.startswith(PREFIX):
                pids = [int(p) for p in self.run(["ip", "netns", "pids", name]).split()]
                if pids:
                    out[name] = pids
        return out

    def stop_leftovers(self) -> dict[str, list[int]]:
        """SIGCONT then SIGKILL to every process still in a txj-* namespace but this one (only the harness starts
        processes there: its servers and Airflow); what it found."""
        left = self.leftovers()
        pids = [p for ps in left.values() for p in ps if p != os.getpid()]
        procs.signal_all(pids, signal.SIGCONT)
        procs.signal_all(pids, signal.SIGKILL)
        return left


def current() -> str:
    """The name of the namespace this process runs in ("" for the root namespace or an unnamed one)."""
    done = subprocess.run(["ip", "netns", "identify", str(os.getpid())], capture_output=True, text=True,
                          timeout=30, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def attach(stack: Any) -> Network:
    """Runs the stack's scripts in their nodes' namespaces (``Stack.wrap``); the Network to cut and heal. The hosts
    come from the environment the parent set (``host_env``)."""
    stack.wrap = {service: exec_prefix(node) for service, node in SERVICE_NODES.items()}
    return Network()


