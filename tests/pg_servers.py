"""Throwaway PostgreSQL servers for tests that need a server of their own (TLS, replicas):
`start_server` runs initdb into a temporary folder and pg_ctl start on a free loopback port, with
trust auth, a database `test` and any server settings given; `start_standby` copies a running
one with `pg_basebackup -R` and starts the copy as its streaming hot standby; `reconfigure`,
`promote` and `kill` (SIGKILL, a crash) act on one, `wait_replayed` waits for a standby to catch
up, `start_replicated` starts a pair (optionally synchronous); `ThrowawayServer.stop` stops it and removes
the folder. As root the server runs as the `postgres` user (else `nobody`), since
initdb refuses root. `tls_files` makes a self-signed CA and a server certificate for
127.0.0.1/localhost with the `cryptography` package. The shell twin for CI is
scripts/pg_throwaway.sh.

Used through a module- or session-scoped fixture, one server per module, so the few seconds a
start takes are paid once: see tests/integration/test_pg_url.py.
"""

from __future__ import annotations

import datetime
import glob
import ipaddress
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """Returns a loopback TCP port nothing listens on now (the OS's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bindir() -> Path:
    """Returns the folder of initdb and pg_ctl: the one on PATH, else the newest
    /usr/lib/postgresql/*/bin. Raises FileNotFoundError when there is none."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    folders = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0
    )
    if not folders:
        raise FileNotFoundError("no initdb on PATH nor in /usr/lib/postgresql/*/bin")
    return Path(folders[-1])


def _server_user() -> pwd.struct_passwd | None:
    """The user a root process runs the server as (None when not root)."""
    if os.getuid() != 0:
        return None
    for name in (os.environ.get("PG_THROWAWAY_USER"), "postgres", "nobody"):
        if name:
            try:
                return pwd.getpwnam(name)
            except KeyError:
                continue
    raise RuntimeError("no user to run a throwaway PostgreSQL as")


def _as(user: pwd.struct_passwd | None) -> Callable[[], None] | None:
    if user is None:
        return None

    def drop() -> None:
        os.setgid(user.pw_gid)
        os.setgroups([])
        os.setuid(user.pw_uid)

    return drop


@dataclass
class ThrowawayServer:
    """A running throwaway server: its folder (`dir`: `data/`, `server.log`, the socket, any
    files given), its port on 127.0.0.1 and the URL of its database `test` as user postgres."""

    dir: Path
    port: int
    user: pwd.struct_passwd | None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/test"

    def stop(self) -> None:
        """Stops the server (fast shutdown) and removes its folder; safe to call twice."""
        if (self.dir / "data" / "postmaster.pid").exists():
            subprocess.run(
                [str(bindir() / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "-t", "30", "stop"],
                preexec_fn=_as(self.user),
                cwd="/",
                capture_output=True,
                check=False,
            )
        shutil.rmtree(self.dir, ignore_errors=True)


def start_server(settings: Mapping[str, str] | None = None, files: Mapping[str, bytes] | None = None) -> ThrowawayServer:
    """Starts a throwaway server with `settings` (postgresql.conf names and values, e.g.
    {"ssl": "on"}) and `files` written first into its folder, read-only for the server's user
    (a setting names one as `{dir}/NAME`, e.g. "ssl_cert_file": "{dir}/server.crt").
    Raises RuntimeError, with the log, when initdb or the start fails."""
    server = _new_server(files)
    initdb = subprocess.run(
        [
            str(bindir() / "initdb"),
            "-D",
            str(server.dir / "data"),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        preexec_fn=_as(server.user),
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    if initdb.returncode != 0:
        server.stop()
        raise RuntimeError(f"initdb failed: {initdb.stdout}{initdb.stderr}")
    _start(server, settings)
    created = subprocess.run(
        [str(bindir() / "createdb"), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "test"],
        capture_output=True,
        text=True,
        check=False,
    )
    if created.returncode != 0:
        server.stop()
        raise RuntimeError(f"createdb failed: {created.stderr}")
    return server


def start_standby(primary: ThrowawayServer, settings: Mapping[str, str] | None = None, name: str = "standby") -> ThrowawayServer:
    """Starts a streaming hot standby of `primary`: `pg_basebackup -R` (which writes
    `primary_conninfo` and `standby.signal`) into a new folder, then the server on a port of its
    own with `settings` (e.g. {"recovery_min_apply_delay": "2s"}); it connects as
    application_name `name`, which the primary's `synchronous_standby_names` can list. Raises
    RuntimeError, with the log, when the copy or the start fails."""
    server = _new_server()
    copied = subprocess.run(
        [
            str(bindir() / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(server.dir / "data"),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        ],
        preexec_fn=_as(server.user),
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    if copied.returncode != 0:
        server.stop()
        raise RuntimeError(f"pg_basebackup failed: {copied.stdout}{copied.stderr}")
    auto = server.dir / "data" / "postgresql.auto.conf"
    text = auto.read_text()  # pg_basebackup -R wrote primary_conninfo = '...': name this standby in it
    auto.write_text(text.replace("primary_conninfo = '", f"primary_conninfo = 'application_name={name} ", 1))
    _start(server, {"hot_standby": "on", **(settings or {})})
    return server


def reconfigure(server: ThrowawayServer, settings: Mapping[str, str]) -> None:
    """Sets `settings` in the server's postgresql.auto.conf (as ALTER SYSTEM would, which a
    standby refuses) and reloads it: for settings a reload changes (`recovery_min_apply_delay`,
    `synchronous_standby_names`)."""
    auto = server.dir / "data" / "postgresql.auto.conf"
    lines = [line for line in auto.read_text().splitlines() if line.split("=")[0].strip() not in settings]
    lines += [f"{name} = '{value}'" for name, value in settings.items()]
    auto.write_text("\n".join(lines) + "\n")
    subprocess.run(
        [str(bindir() / "pg_ctl"), "-D", str(server.dir / "data"), "reload"],
        preexec_fn=_as(server.user),
        cwd="/",
        capture_output=True,
        check=True,
    )


def promote(server: ThrowawayServer) -> None:
    """Promotes a standby to a primary (`pg_ctl promote`, waiting until it accepts writes)."""
    subprocess.run(
        [str(bindir() / "pg_ctl"), "-D", str(server.dir / "data"), "-w", "-t", "60", "promote"],
        preexec_fn=_as(server.user),
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )


def kill(server: ThrowawayServer) -> None:
    """Ends the server as a crash would: SIGKILL to the postmaster and every one of its
    processes at once (no shutdown checkpoint, no goodbye to clients or standbys)."""
    pid = int((server.dir / "data" / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # the parent's pid is the stat file's 4th field, 2nd after the name
            children.append(int(stat.parent.name))
    for one in [pid, *children]:
        try:
            os.kill(one, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _new_server(files: Mapping[str, bytes] | None = None) -> ThrowawayServer:
    """Makes the folder of a server (owned by the server's user, `files` in it) and picks its port."""
    user = _server_user()
    folder = Path(tempfile.mkdtemp(prefix="pg_throwaway."))
    folder.chmod(0o755)
    for name, content in (files or {}).items():
        path = folder / name
        path.write_bytes(content)
        path.chmod(0o600)
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)
    if user is not None:
        os.chown(folder, user.pw_uid, user.pw_gid)
    return ThrowawayServer(folder, free_port(), user)


def _start(server: ThrowawayServer, settings: Mapping[str, str] | None) -> None:
    """Starts the server of `server.dir / "data"` with `settings` (after the defaults, so they win)."""
    folder = server.dir
    options = [f"-p {server.port}", f"-k {folder}", "-c listen_addresses=127.0.0.1", "-c fsync=off", "-c synchronous_commit=off"]
    options += [f"-c {name}={value.format(dir=folder)}" for name, value in (settings or {}).items()]
    started = subprocess.run(
        [
            str(bindir() / "pg_ctl"),
            "-D",
            str(folder / "data"),
            "-l",
            str(folder / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
            "-o",
            " ".join(options),
        ],
        preexec_fn=_as(server.user),
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        log = (folder / "server.log").read_text(errors="replace") if (folder / "server.log").exists() else ""
        server.stop()
        raise RuntimeError(f"the throwaway server did not start: {started.stderr}{log}")


@dataclass(frozen=True)
class TLSFiles:
    """A self-signed CA (`ca_pem`) and a server certificate it signed for 127.0.0.1 and
    localhost (`cert_pem`, `key_pem`), all PEM."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def server_files(self) -> dict[str, bytes]:
        """The files `start_server` writes for a server with TLS (see `TLS_SETTINGS`)."""
        return {"server.crt": self.cert_pem, "server.key": self.key_pem}


TLS_SETTINGS = {"ssl": "on", "ssl_cert_file": "{dir}/server.crt", "ssl_key_file": "{dir}/server.key"}
"""The server settings of TLS with `TLSFiles.server_files`."""


def tls_files() -> TLSFiles:
    """Returns a fresh CA and a server certificate for 127.0.0.1/localhost, valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "chatrecord test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return TLSFiles(
        ca.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        ),
    )


def replay_position(server: ThrowawayServer) -> str:
    """Returns the WAL position `server` has replayed (a standby) or written (a primary)."""
    import psycopg

    with psycopg.connect(server.url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END::text"
        ).fetchone()
    assert row is not None
    return str(row[0])


def wait_replayed(primary: ThrowawayServer, standby: ThrowawayServer, timeout: float = 30.0) -> None:
    """Waits until `standby` has replayed everything `primary` wrote so far; raises
    TimeoutError after `timeout` seconds."""
    import time

    import psycopg

    with psycopg.connect(primary.url, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    target = str(row[0])
    deadline = time.monotonic() + timeout
    with psycopg.connect(standby.url, autocommit=True, connect_timeout=5) as conn:
        while True:
            done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()
            if done is not None and done[0]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby on port {standby.port} did not replay up to {target} in {timeout} s")
            time.sleep(0.02)


@dataclass
class Replicated:
    """A primary and its streaming hot standby (`start_replicated`)."""

    primary: ThrowawayServer
    standby: ThrowawayServer

    @property
    def url(self) -> str:
        """The multi-host URL of both, the one that accepts writes chosen by libpq."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}/test"
            "?target_session_attrs=read-write"
        )

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop()


def start_replicated(synchronous: bool = False, standby_settings: Mapping[str, str] | None = None) -> Replicated:
    """Starts a primary and a streaming hot standby of it (`start_standby`). `synchronous`: the
    primary commits only once the standby has the commit's WAL on disk
    (`synchronous_commit=on`, `synchronous_standby_names` naming the standby), so a crash of
    the primary loses no acknowledged commit. Raises RuntimeError when a server fails to start."""
    primary = start_server({"synchronous_commit": "on"} if synchronous else None)
    try:
        standby = start_standby(primary, standby_settings)
    except BaseException:
        primary.stop()
        raise
    pair = Replicated(primary, standby)
    try:
        if synchronous:
            reconfigure(primary, {"synchronous_standby_names": "standby"})
        wait_replayed(primary, standby)
    except BaseException:
        pair.stop()
        raise
    return pair
