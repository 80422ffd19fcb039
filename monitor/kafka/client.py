"""How the monitor's Kafka clients connect: their options, TLS, and why no broker answers.

`client_options` is what the consumer, the dead-letter producer and the scores
publisher are all made with; `ssl_context` checks the TLS settings and names the
one that is wrong. When no broker answers at start, `why_unreachable` connects to
each bootstrap address itself to say why (aiokafka only says it could not bootstrap).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Iterator

from monitor.config import PREFIX, ConfigError, Settings

#: what a record the monitor produces may carry at most (a dead-letter original, the
#: demo's traffic); larger dead-letter originals are sent without their value
MAX_REQUEST_BYTES = 16 * 1024 * 1024


class KafkaUnreachable(Exception):
    """No broker of ``bootstrap_servers`` could be reached at start (the message says why)."""

    def __init__(self, bootstrap_servers: str, detail: str) -> None:
        super().__init__(f"cannot reach Kafka at {bootstrap_servers}: {detail}")
        self.bootstrap_servers = bootstrap_servers
        self.detail = detail


TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def ssl_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context of every Kafka client; ConfigError naming the setting that is wrong.

    The broker's certificate is always verified: against ``kafka_ssl_cafile``, else the
    system's CAs; its name is checked unless ``kafka_ssl_check_hostname`` is off. A client
    certificate (``kafka_ssl_certfile``, with ``kafka_ssl_keyfile`` unless the key is in
    the same file) is presented when set.
    """
    if settings.kafka_security_protocol not in TLS_PROTOCOLS:
        for name in ("cafile", "certfile", "keyfile"):
            if getattr(settings, f"kafka_ssl_{name}") is not None:
                raise ConfigError(
                    f"{PREFIX}KAFKA_SSL_{name.upper()} is set, but "
                    f"{PREFIX}KAFKA_SECURITY_PROTOCOL is {settings.kafka_security_protocol} "
                    "(SSL or SASL_SSL uses it)"
                )
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if settings.kafka_ssl_cafile is not None:
        try:
            context.load_verify_locations(cafile=settings.kafka_ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{PREFIX}KAFKA_SSL_CAFILE: cannot load {settings.kafka_ssl_cafile}: "
                f"{_file_error(exc)}"
            ) from None
    if settings.kafka_ssl_keyfile is not None and settings.kafka_ssl_certfile is None:
        raise ConfigError(f"{PREFIX}KAFKA_SSL_KEYFILE is set without {PREFIX}KAFKA_SSL_CERTFILE")
    if settings.kafka_ssl_certfile is not None:
        try:
            context.load_cert_chain(settings.kafka_ssl_certfile, settings.kafka_ssl_keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{PREFIX}KAFKA_SSL_CERTFILE/_KEYFILE: cannot load "
                f"{settings.kafka_ssl_certfile}: {_file_error(exc)}"
            ) from None
    context.check_hostname = settings.kafka_ssl_check_hostname
    return context


def _file_error(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return f"not a usable PEM file ({exc.reason or exc})"
    return exc.strerror.lower() if exc.strerror else str(exc)


def client_options(settings: Settings) -> dict[str, object]:
    """The connection options every aiokafka client of the monitor is made with."""
    options: dict[str, object] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "security_protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_security_protocol in TLS_PROTOCOLS:
        options["ssl_context"] = ssl_context(settings)
    if settings.kafka_sasl_mechanism:
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        if settings.kafka_sasl_password is not None:
            options["sasl_plain_password"] = settings.kafka_sasl_password.get_secret_value()
    return options


@contextlib.contextmanager
def quiet_client_log() -> Iterator[None]:
    """Silence aiokafka's own log while a client starts (`KafkaUnreachable` says why it failed)."""
    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        client_log.setLevel(level)


async def why_unreachable(settings: Settings, error: BaseException) -> str:
    """Why the brokers cannot be reached, in words: each bootstrap address's own failure.

    aiokafka only says "Unable to bootstrap"; a direct connection (TLS when configured,
    with the same context) names the cause: refused, timed out, certificate not trusted.
    """
    tls = settings.kafka_security_protocol in TLS_PROTOCOLS
    context = ssl_context(settings) if tls else None
    addresses = [a.strip() for a in settings.kafka_bootstrap_servers.split(",") if a.strip()]
    failures: list[str] = []
    for address in addresses:
        failure = await _connect_failure(address, context)
        if failure is not None:
            failures.append(failure if len(addresses) == 1 else f"{address}: {failure}")
    if not failures:
        return f"the brokers accept connections, but the client failed: {type(error).__name__}"
    return "; ".join(failures)


async def _connect_failure(address: str, context: ssl.SSLContext | None) -> str | None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return "not of the form host:port"
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port), ssl=context), 5.0
        )
    except TimeoutError:
        return "no answer within 5 s"
    except ssl.SSLCertVerificationError as exc:
        return f"TLS: certificate verify failed: {exc.verify_message}"
    except ssl.SSLError as exc:
        return f"TLS: {exc.reason or exc}"
    except socket.gaierror as exc:
        return f"cannot resolve {host}: {exc.strerror}"
    except OSError as exc:
        return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
