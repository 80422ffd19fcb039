"""Kafka over TLS: the ``RAG_MONITOR_KAFKA_SSL_*`` settings against a real TLS listener.

Debian's ``stunnel4`` terminates TLS (and requires a client certificate) in
front of a Tansu broker that advertises stunnel's port, so every connection
the clients make, bootstrap and broker alike, is TLS. The test makes its own
CA, a server certificate for 127.0.0.1 and a client certificate
(``cryptography``), and a second CA that signed nothing the server presents.

Tansu even when the session's broker is noida-db: noida-db advertises the
address it listens on and cannot be told another one, so no proxy can sit
in front of it.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from monitor.app import build, serve
from monitor.config import ConfigError, Settings
from monitor.kafka.client import ssl_context
from monitor.sources.kafka import KafkaSource
from tests.fixtures.kafka import Topic, monitor_settings, require_broker
from tests.support import ROOT
from tests.support.embedded import Broker, free_port
from tests.support.judge_server import JudgeServer
from tests.support.records import encode, interaction
from tests.support.tools import require_tool
from tests.support.waits import wait_until, wait_until_sync

pytestmark = pytest.mark.kafka


# --- a CA and certificates (PEM files)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return key


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def make_ca(folder: Path, name: str) -> tuple[Issued, ec.EllipticCurvePrivateKey]:
    key = _key(folder / f"{name}.key")
    cert = (
        _builder(name, _name(name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .sign(key, hashes.SHA256())
    )
    path = folder / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(path, folder / f"{name}.key"), key


def issue(folder: Path, name: str, ca: Issued, ca_key: ec.EllipticCurvePrivateKey,
          *, server: bool) -> Issued:  # fmt: skip
    key = _key(folder / f"{name}.key")
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = _builder(name, ca_cert.subject, key.public_key()).add_extension(
        x509.ExtendedKeyUsage([usage]), critical=False
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    path = folder / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(path, folder / f"{name}.key")


@dataclass(frozen=True)
class Pki:
    ca: Issued
    other_ca: Issued
    server: Issued
    client: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca, ca_key = make_ca(folder, "test-ca")
    other, _ = make_ca(folder, "other-ca")
    return Pki(ca, other, issue(folder, "broker", ca, ca_key, server=True),
               issue(folder, "monitor", ca, ca_key, server=False))  # fmt: skip


# --- Tansu behind stunnel


@dataclass(frozen=True)
class TlsBroker:
    broker: Broker
    port: int  # stunnel's: the one to bootstrap from

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    stunnel = require_tool("stunnel4", "stunnel4", aliases=("stunnel",))
    tls_port = free_port()
    broker = require_broker("tansu", advertised_port=tls_port).start()
    folder = tmp_path_factory.mktemp("stunnel")
    config = folder / "stunnel.conf"
    config.write_text(
        "foreground = yes\npid =\n\n[kafka]\n"
        f"accept = 127.0.0.1:{tls_port}\nconnect = 127.0.0.1:{broker.port}\n"
        f"cert = {pki.server.cert}\nkey = {pki.server.key}\n"
        f"CAfile = {pki.ca.cert}\nverifyChain = yes\n"  # a client certificate is required
    )
    log = open(folder / "stunnel.log", "wb")  # closed below
    tunnel = subprocess.Popen([stunnel, str(config)], stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    try:

        def stunnel_log() -> str:
            return (folder / "stunnel.log").read_text(errors="replace")

        def accepting() -> bool:
            try:
                socket.create_connection(("127.0.0.1", tls_port), timeout=0.5).close()
                return True
            except OSError:
                if tunnel.poll() is not None:
                    raise AssertionError(f"stunnel exited:\n{stunnel_log()}") from None
                return False

        wait_until_sync(accepting, 20, lambda: f"stunnel to accept on {tls_port}:\n{stunnel_log()}",
                        interval=0.05)  # fmt: skip
        yield TlsBroker(broker, tls_port)
    finally:
        tunnel.terminate()
        tunnel.wait(10)
        log.close()
        broker.stop()


def tls_settings(
    tls: TlsBroker, topic: Topic, judge: JudgeServer, pki: Pki, **extra: object
) -> Settings:
    values: dict[str, object] = {
        "kafka_security_protocol": "SSL",
        "kafka_ssl_cafile": str(pki.ca.cert),
        "kafka_ssl_certfile": str(pki.client.cert),
        "kafka_ssl_keyfile": str(pki.client.key),
    }
    values.update(extra)
    return monitor_settings(tls.broker, topic, judge, **values)


async def create_topics_over_tls(settings: Settings, names: list[str]) -> None:
    deadline = time.monotonic() + 30
    while True:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=settings.kafka_bootstrap_servers,
            security_protocol="SSL",
            ssl_context=ssl_context(settings),
        )
        try:
            await admin.start()
            try:
                await admin.create_topics([NewTopic(n, 4, replication_factor=1) for n in names])
            finally:
                await admin.close()
            return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)  # retrying an action: its own KafkaError ends it


def topic_for(tls: TlsBroker, name: str) -> Topic:
    return Topic(tls.bootstrap, f"{name}-in", f"{name}-dlq", f"{name}-group", 4)


async def test_a_record_flows_over_tls_with_a_client_certificate(
    tls_broker: TlsBroker, pki: Pki, judge_server: JudgeServer
) -> None:
    topic = topic_for(tls_broker, "tls-good")
    settings = tls_settings(tls_broker, topic, judge_server, pki)
    await create_topics_over_tls(settings, [topic.name, topic.dlq])
    producer = AIOKafkaProducer(bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                                ssl_context=ssl_context(settings))  # fmt: skip
    await producer.start()
    try:
        await producer.send_and_wait(topic.name, encode(interaction(1)), key=b"rec-1")
    finally:
        await producer.stop()
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:

        def scored() -> bool:
            if task.done():
                task.result()  # raises what stopped it
                raise AssertionError("the monitor stopped on its own")
            return bool(parts.exporter.records_scored._value.get() >= 1)

        await wait_until(scored, 60, "the record to be scored over TLS")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert isinstance(parts.source, KafkaSource) and parts.source.reachable


def run_monitor(settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env.update({"PYTHONPATH": str(ROOT), "RAG_MONITOR_METRICS_PORT": "0",
                "RAG_MONITOR_KAFKA_SECURITY_PROTOCOL": "SSL", **settings})  # fmt: skip
    return subprocess.run([sys.executable, "-m", "monitor", "run"], env=env, capture_output=True,
                          text=True, timeout=90, cwd=ROOT, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_wrong_ca_fails_at_start_with_a_clear_line(tls_broker: TlsBroker, pki: Pki) -> None:
    done = run_monitor({
        "RAG_MONITOR_KAFKA_BOOTSTRAP_SERVERS": tls_broker.bootstrap,
        "RAG_MONITOR_KAFKA_SSL_CAFILE": str(pki.other_ca.cert),
        "RAG_MONITOR_KAFKA_SSL_CERTFILE": str(pki.client.cert),
        "RAG_MONITOR_KAFKA_SSL_KEYFILE": str(pki.client.key),
    })  # fmt: skip
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(errors) == 1, done.stderr
    # OpenSSL's reason depends on the chain the server sends: not trusted, either way
    assert errors[0] in [
        f"rag-monitor: cannot reach Kafka at {tls_broker.bootstrap}: "
        f"TLS: certificate verify failed: {reason}"
        for reason in ("self-signed certificate in certificate chain",
                       "unable to get local issuer certificate")
    ], done.stderr  # fmt: skip
    assert "Traceback" not in done.stderr


def test_unreadable_tls_files_and_a_plaintext_protocol_name_the_setting(
    tmp_path: Path, pki: Pki
) -> None:
    missing = tmp_path / "nope.pem"
    done = run_monitor({"RAG_MONITOR_KAFKA_SSL_CAFILE": str(missing)})
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"rag-monitor: RAG_MONITOR_KAFKA_SSL_CAFILE: cannot load {missing}: "
        "no such file or directory"
    )
    done = run_monitor({"RAG_MONITOR_KAFKA_SSL_CERTFILE": str(pki.ca.key)})  # a key, no cert
    assert done.returncode == 2 and "RAG_MONITOR_KAFKA_SSL_CERTFILE" in done.stderr
    done = run_monitor({"RAG_MONITOR_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
                        "RAG_MONITOR_KAFKA_SSL_CAFILE": str(pki.ca.cert)})  # fmt: skip
    assert done.returncode == 2
    assert "RAG_MONITOR_KAFKA_SECURITY_PROTOCOL is PLAINTEXT" in done.stderr


def test_hostname_check_can_be_turned_off_but_the_certificate_is_still_verified(
    pki: Pki,
) -> None:
    from monitor.config import load_settings

    settings = load_settings(kafka_security_protocol="SSL", kafka_ssl_cafile=str(pki.ca.cert),
                             kafka_ssl_check_hostname=False)  # fmt: skip
    context = ssl_context(settings)
    assert context.check_hostname is False
    assert context.verify_mode.name == "CERT_REQUIRED"
    with pytest.raises(ConfigError, match="RAG_MONITOR_KAFKA_SSL_KEYFILE is set without"):
        ssl_context(settings.model_copy(update={"kafka_ssl_keyfile": str(pki.client.key)}))
