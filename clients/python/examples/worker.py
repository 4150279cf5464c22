#!/usr/bin/env python3
"""Closes orders: handles $DELAYQ_TOPIC (default orders.close) with 4 handlers
at once, prints `done <id>` once the server has accepted a job's finish, and
on SIGTERM or SIGINT drains running handlers for up to 30 s, then exits 0.

    DELAYQ_SERVER=127.0.0.1:7701 python3 clients/python/examples/worker.py

(From the repository without installing: PYTHONPATH=clients/python/src.)
"""
import os
from datetime import timedelta

from delayq import AckKind, Client, Worker


def close_order(job):
    pass  # close the order job.json() names; raise to retry it later with backoff


def acknowledged(job, kind, error):
    if kind is AckKind.FINISH and error is None:  # the finish landed
        print(f"done {job.id}", flush=True)


client = Client()  # $DELAYQ_SERVER (a,b,... for failover), $DELAYQ_AUTH_TOKEN
worker = Worker(client, concurrency=4, on_acknowledged=acknowledged)
worker.handle(os.environ.get("DELAYQ_TOPIC") or "orders.close", close_order)
worker.run_forever(drain=timedelta(seconds=30))
