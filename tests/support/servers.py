"""redis-server and ZooKeeper processes on free loopback ports, killable and restartable with their data, and a
TCP proxy that can cut the network between a client and a server.

Fault-injection harnesses (the soak, the infrastructure-fault tests) restart the servers under a running
topology, so they start their own rather than the shared development ones.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import redis

ZK_SERVER = "/usr/share/zookeeper/bin/zkServer.sh"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Server:
    """A child process on a port of its own; ``start`` again after ``kill`` restarts it on the same port."""

    name = "server"

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, timeout: float = 30.0) -> None:
        restart = bool(self.port)  # clients point at the port: a restart keeps it
        for _ in range(1 if restart else 5):
            self.port = self.port if restart else free_port()
            self.process = self._spawn()
            if self._wait(timeout):
                return
            self.kill()
        raise RuntimeError(f"{self.name} did not start on 127.0.0.1:{self.port} (see {self.workdir})")

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.process is not None and self.process.poll() is None and time.monotonic() < deadline:
            if self._answers():
                return self.process.poll() is None  # not some other server on a port taken meanwhile
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        """SIGKILL (the whole process group): the server is gone, connections are refused."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
            self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _spawn(self) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    def _answers(self) -> bool:
        raise NotImplementedError


class RedisServer(_Server):
    """redis-server with an append-only file fsynced on every write: a restart keeps every acknowledged write."""

    name = "redis-server"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir),
             "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    def _tls(self) -> dict[str, object]:
        """How a client reaches it (TlsRedisServer: with its certificates)."""
        return {}

    def _answers(self) -> bool:
        # retry=None: no retries (redis-py takes None, though its hint says Retry)
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.2, retry=None,  # type: ignore[arg-type]
                            **self._tls())
        try:
            return bool(probe.ping())
        except (redis.ConnectionError, redis.BusyLoadingError):
            return False
        finally:
            probe.close()


class TlsRedisServer(RedisServer):
    """redis-server serving TLS only, with certificates of a private CA made here, and a client certificate it
    requires (``--tls-auth-clients yes``): what the Redis provider's ``ssl_*`` extras are for."""

    name = "redis-server (TLS)"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.ca, self.cert, self.key = make_certificates(self.workdir)

    def _spawn(self) -> subprocess.Popen[bytes]:
        d = self.workdir
        return subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(d), "--tls-cert-file", str(d / "server.crt"), "--tls-key-file",
             str(d / "server.key"), "--tls-ca-cert-file", str(self.ca), "--tls-auth-clients", "yes",
             "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return (f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.ca}&ssl_certfile={self.cert}"
                f"&ssl_keyfile={self.key}")

    def _tls(self) -> dict[str, object]:
        return {"ssl": True, "ssl_ca_certs": str(self.ca), "ssl_certfile": str(self.cert), "ssl_keyfile": str(self.key)}


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA, as PEM files in
    ``folder``; returns the CA's, the client certificate's and the client key's paths."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def issue(name: str, key, issuer, issuer_key, ca: bool, san=None):  # type: ignore[no-untyped-def]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key or key, hashes.SHA256())

    def write(stem: str, cert, key) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
        crt, pem = folder / f"{stem}.crt", folder / f"{stem}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
        pem.chmod(0o600)
        return crt, pem

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = issue("txdag test CA", ca_key, None, None, True)
    ca_path, _ = write("ca", ca, ca_key)
    server_key = ec.generate_private_key(ec.SECP256R1())
    write("server", issue("127.0.0.1", server_key, ca.subject, ca_key, False,
                          [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), server_key)
    client_key = ec.generate_private_key(ec.SECP256R1())
    cert, key = write("client", issue("txdag test client", client_key, ca.subject, ca_key, False), client_key)
    return ca_path, cert, key


class ZooKeeperServer(_Server):
    """A standalone ZooKeeper (Debian's), loopback only, no JMX, no admin server; its data survives a restart.

    tickTime=250 lets a client ask for sessions as short as 0.5 s, so that session-expiry tests stay short.
    """

    name = "ZooKeeper"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _spawn(self) -> subprocess.Popen[bytes]:
        config = self.workdir / "zoo.cfg"
        config.write_text(
            f"tickTime=250\ndataDir={self.workdir / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\nminSessionTimeout=500\n"
            "maxSessionTimeout=60000\n"
        )
        env = {**os.environ, "JMXDISABLE": "true", "ZOO_LOG_DIR": str(self.workdir), "SERVER_JVMFLAGS": "-Xmx256m"}
        with (self.workdir / "zookeeper.log").open("ab") as log:
            return subprocess.Popen([ZK_SERVER, "start-foreground", str(config)], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def _answers(self) -> bool:
        """'srvr' reports the server's mode only once it serves requests ('ruok' answers earlier)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"srvr")
                reply = b""
                while chunk := sock.recv(4096):
                    reply += chunk
            return b"Mode: standalone" in reply
        except OSError:
            return False


class Proxy:
    """A TCP proxy on a free loopback port to ``127.0.0.1:target``; ``cut()`` is a network partition.

    While cut, open connections are closed and new ones are closed as soon as accepted, so the client sees its
    server unreachable while the server itself keeps running (and expires the client's session).
    """

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.is_cut = False
        self._open: list[socket.socket] = []
        self._guard = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"proxy-{self.port}").start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._guard:
            self.is_cut = True
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def heal(self) -> None:
        with self._guard:
            self.is_cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = None if self.is_cut else socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                upstream = None
            with self._guard:
                if upstream is None or self.is_cut:
                    _close(client)
                    if upstream is not None:
                        _close(upstream)
                    continue
                upstream.settimeout(None)
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
