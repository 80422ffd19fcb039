"""Whether the brokers answer: a metadata request every few seconds, for ``/readyz``.

The client reconnects by itself; the probe only notices, logs an outage once and its
end once, and keeps `BrokerProbe.reachable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from aiokafka.errors import KafkaError

from monitor.background import BackgroundTask

log = structlog.get_logger("monitor.kafka.probe")

#: the brokers are probed this often while they answer; while they do not, the probe
#: backs off from a fifth of it to PROBE_BACKOFF_CAP
PROBE_SECONDS = 5.0
PROBE_BACKOFF_CAP = 30.0
PROBE_TIMEOUT_SECONDS = 10.0


class BrokerProbe:
    """Calls ``ping`` (a metadata request) every ``every`` seconds while it answers, backing
    off while it does not. Construction starts nothing; `start` and `stop` the task."""

    def __init__(
        self,
        ping: Callable[[], Awaitable[object]],
        bootstrap_servers: str,
        *,
        every: float = PROBE_SECONDS,
    ) -> None:
        self.ping = ping
        self.bootstrap_servers = bootstrap_servers
        self.every = every
        #: whether the brokers answered the last probe (``/readyz`` check ``kafka``)
        self.reachable = False
        self._task = BackgroundTask(self._run, "kafka-probe")

    def start(self) -> None:
        """The brokers just answered (a client started): reachable, probed from now on."""
        self.reachable = True
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        delay = 0.0
        while True:
            try:
                await asyncio.wait_for(self.ping(), PROBE_TIMEOUT_SECONDS)
            except (KafkaError, TimeoutError) as exc:
                delay = min(PROBE_BACKOFF_CAP, delay * 2) if delay else self.every / 5
                event = "cannot reach Kafka: retrying" if self.reachable else "Kafka still away"
                (log.warning if self.reachable else log.info)(
                    event,
                    bootstrap_servers=self.bootstrap_servers,
                    error=type(exc).__name__,
                    retry_in=round(delay, 2),
                )
                self.reachable = False
                await asyncio.sleep(delay)
                continue
            if not self.reachable:
                log.info("Kafka reachable again", bootstrap_servers=self.bootstrap_servers)
            self.reachable = True
            delay = 0.0
            await asyncio.sleep(self.every)
