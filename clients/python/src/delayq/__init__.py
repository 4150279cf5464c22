"""delayq's Python client and worker.

    from datetime import timedelta
    from delayq import Client, Worker

    client = Client()                                   # $DELAYQ_SERVER, else 127.0.0.1:7701
    client.add("emails.send", b"hello", delay=timedelta(seconds=5))

    worker = Worker(client)

    @worker.handler("emails.send")
    def send(job):                                      # raise to retry later
        print(job.text)

    worker.run_forever()                                # SIGTERM/SIGINT: drain, then exit

``Client`` (sync) and ``AsyncClient`` (asyncio) have the same methods; the
``Worker`` runs sync handlers in threads and async ones on its event loop.
See the README for the whole API, the failover rules and the stop.
"""

from .aio import AsyncClient
from .client import Client
from .errors import (
    DelayqError,
    ExistsError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    NotReservedError,
    StaleReceiptError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
)
from .models import AddResult, Delivery, Job, JobState, Stats, TopicStats
from .outcomes import Backoff, Bury, Outcome, Retry, RetryIn, Success, backoff_delay_ms
from .worker import AckKind, Worker, WorkerStats

__version__ = "0.1.0"

__all__ = [
    "Client",
    "AsyncClient",
    "Worker",
    "WorkerStats",
    "AckKind",
    "Success",
    "Retry",
    "RetryIn",
    "Bury",
    "Outcome",
    "Backoff",
    "backoff_delay_ms",
    "AddResult",
    "Delivery",
    "Job",
    "JobState",
    "Stats",
    "TopicStats",
    "DelayqError",
    "InvalidArgumentError",
    "NotFoundError",
    "ExistsError",
    "StaleReceiptError",
    "NotReservedError",
    "TooLargeError",
    "UnauthorizedError",
    "UnavailableError",
    "InternalError",
]
