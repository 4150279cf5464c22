#!/usr/bin/env python3
"""Job lifecycles per second through the Python Worker: the peer of
bench/bullmq/lifecycle.js (BullMQ's Worker on Redis).

A Worker at CONCURRENCY (50) with a handler that does nothing, while
producers add BODY-byte (100) jobs due now, with at most WINDOW (1000) added
and not yet finished. Counted between the warm-up's end (WARMUP_SECONDS, 2)
and RUN_SECONDS (5) later: lifecycles (finishes the server accepted, from
the worker's on_acknowledged) and adds. One JSON line on stdout.

    DELAYQ_SERVER=127.0.0.1:7701 /usr/bin/python3 clients/python/bench/lifecycle.py

Environment:
  DELAYQ_SERVER, DELAYQ_AUTH_TOKEN   the servers (default 127.0.0.1:7701)
  CONCURRENCY=50  WINDOW=1000  RUN_SECONDS=5  WARMUP_SECONDS=2  BODY=100
  PRODUCERS=2     producer tasks (one AsyncClient between them and the worker)
  ADD_MODE=bulk   bulk: each producer keeps one add_many of up to BATCH=50 jobs in
                  flight (one pipeline; BullMQ's addBulk, its default); add: up to
                  ADD_DEPTH=16 single adds in flight per producer
  HANDLER=async   async (on the event loop) or sync (in the worker's threads)
  PRODUCER=0      the worker alone (feed it from another process: ROLE=producer)
  ROLE=producer   producers alone, for RUN_SECONDS + WARMUP_SECONDS, then exit;
                  the window is then not known here: adds are paced only by
                  ADD_DEPTH, so pair it with a worker that keeps up
  TOPIC           default bench.lifecycle.<pid>
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import delayq  # noqa: E402


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


CONCURRENCY = env_int("CONCURRENCY", 50)
WINDOW = env_int("WINDOW", 1000)
RUN_SECONDS = float(os.environ.get("RUN_SECONDS") or 5)
WARMUP_SECONDS = float(os.environ.get("WARMUP_SECONDS") or 2)
BODY = b"x" * env_int("BODY", 100)
PRODUCERS = env_int("PRODUCERS", 2)
ADD_MODE = os.environ.get("ADD_MODE", "bulk")
BATCH = env_int("BATCH", 50)
ADD_DEPTH = env_int("ADD_DEPTH", 16)
HANDLER = os.environ.get("HANDLER", "async")
WITH_PRODUCERS = os.environ.get("PRODUCER", "1") != "0"
ROLE = os.environ.get("ROLE", "all")
TOPIC = os.environ.get("TOPIC") or f"bench.lifecycle.{os.getpid()}"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Counts:
    def __init__(self) -> None:
        self.outstanding = 0  # added (or being added), not finished
        self.lifecycles = 0  # finishes accepted, in the measured window
        self.adds = 0  # adds answered, in the measured window
        self.measuring = False
        self.errors = 0
        self.first_error = ""
        self.room = asyncio.Event()

    def error(self, e: BaseException) -> None:
        self.errors += 1
        if not self.first_error:
            self.first_error = f"{type(e).__name__}: {e}"


async def producer(client: delayq.AsyncClient, n: Counts, stop: asyncio.Event, windowed: bool) -> None:
    """Adds while the window has room: one add_many of up to BATCH jobs at a
    time (bulk), or up to ADD_DEPTH single adds in flight (add)."""
    inflight: set = set()

    async def add_some(k: int) -> None:
        try:
            if ADD_MODE == "bulk":
                await client.add_many(TOPIC, [BODY] * k)
            else:
                await client.add(TOPIC, BODY)
            if n.measuring:
                n.adds += k
        except delayq.DelayqError as e:
            n.error(e)
            n.outstanding -= k

    depth = 1 if ADD_MODE == "bulk" else ADD_DEPTH
    while not stop.is_set():
        room = WINDOW - n.outstanding if windowed else BATCH
        if room <= 0 or len(inflight) >= depth:
            n.room.clear()
            waiters = [asyncio.ensure_future(n.room.wait()), asyncio.ensure_future(stop.wait())]
            if inflight:
                waiters.append(asyncio.ensure_future(asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)))
            _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for p in pending:
                p.cancel()
            inflight = {t for t in inflight if not t.done()}
            continue
        k = min(BATCH, room) if ADD_MODE == "bulk" else 1
        n.outstanding += k
        inflight.add(asyncio.ensure_future(add_some(k)))
    if inflight:
        await asyncio.wait(inflight)


async def main() -> dict:
    client = delayq.AsyncClient()
    n = Counts()
    stop = asyncio.Event()

    def on_ack(job: delayq.Delivery, kind: delayq.AckKind, err: object) -> None:
        if err is not None:
            n.error(err)  # type: ignore[arg-type]
            return
        n.outstanding -= 1
        if n.measuring:
            n.lifecycles += 1
        n.room.set()

    worker = None
    if ROLE != "producer":
        worker = delayq.Worker(client, concurrency=CONCURRENCY, on_acknowledged=on_ack)
        if HANDLER == "sync":
            worker.handle(TOPIC, lambda job: None)
        else:

            async def noop(job: delayq.Delivery) -> None:
                return None

            worker.handle(TOPIC, noop)
        await worker.start()
    producers = []
    if ROLE == "producer" or WITH_PRODUCERS:
        windowed = ROLE != "producer"
        producers = [asyncio.ensure_future(producer(client, n, stop, windowed)) for _ in range(PRODUCERS)]

    await asyncio.sleep(WARMUP_SECONDS)
    stats0 = worker.stats if worker else None
    cpu0 = cpu_seconds()
    t0 = time.monotonic()
    n.measuring = True
    await asyncio.sleep(RUN_SECONDS)
    n.measuring = False
    wall = time.monotonic() - t0
    cpu = cpu_seconds() - cpu0
    stats1 = worker.stats if worker else None

    stop.set()
    n.room.set()
    await asyncio.gather(*producers, return_exceptions=True)
    if worker is not None and ROLE != "producer" and WITH_PRODUCERS:
        # Drain what is outstanding (at most 15 s), so the queue is left empty.
        end = time.monotonic() + 15
        while n.outstanding > 0 and time.monotonic() < end:
            await asyncio.sleep(0.02)
    if worker is not None:
        await worker.stop(timedelta(seconds=5))
    await client.close()

    result = {
        "lifecycles_per_s": round(n.lifecycles / wall),
        "adds_per_s": round(n.adds / wall),
        "lifecycles": n.lifecycles,
        "adds": n.adds,
        "seconds": round(wall, 2),
        "warmup_s": WARMUP_SECONDS,
        "concurrency": CONCURRENCY,
        "window": WINDOW,
        "body": len(BODY),
        "producers": PRODUCERS if (ROLE == "producer" or WITH_PRODUCERS) else 0,
        "add_mode": ADD_MODE,
        "batch": BATCH if ADD_MODE == "bulk" else None,
        "add_depth": ADD_DEPTH if ADD_MODE == "add" else None,
        "handler": HANDLER,
        "role": ROLE,
        "process_cpu_util": round(cpu / wall, 2),
        "left_outstanding": max(0, n.outstanding) if WITH_PRODUCERS and ROLE != "producer" else None,
        "errors": n.errors,
        "first_error": n.first_error or None,
        "servers": client.servers,
        "python": sys.version.split()[0],
        "redis_py": __import__("redis").__version__,
    }
    if stats0 is not None and stats1 is not None:
        handled = stats1.handled - stats0.handled
        result["reserves_per_lifecycle"] = round((stats1.reserves - stats0.reserves) / max(1, handled), 3)
        result["ack_batches_per_lifecycle"] = round(
            (stats1.ack_batches - stats0.ack_batches) / max(1, handled), 3
        )
    return result


if __name__ == "__main__":
    out = asyncio.run(main())
    print(json.dumps(out), flush=True)
    sys.exit(1 if out["errors"] else 0)
