"""TLS: both clients and the worker against `delayq serve --tls-cert-file`,
the server's certificate checked against the CA and the address's host,
mutual TLS, the DELAYQ_TLS/CACERT/CERT/KEY variables, and the option errors.
Certificates come from the openssl command (conftest.Certs)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any, Iterator

import pytest
from conftest import Certs, Server, tls_server, wait_for
from test_client import make

import delayq


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("DELAYQ_SERVER", "DELAYQ_AUTH_TOKEN", "DELAYQ_TLS", "DELAYQ_CACERT",
                 "DELAYQ_CERT", "DELAYQ_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def mtls_server(certs: Certs) -> Iterator[Server]:
    s = tls_server(certs, "server", "--tls-ca-cert-file", certs.path("ca.pem"))
    yield s
    s.stop()


def lifecycle(client: Any, topic: str) -> None:
    added = client.add(topic, b"over tls")
    jobs = client.reserve(topic)
    assert [j.id for j in jobs] == [added.id]
    assert jobs[0].body == b"over tls"
    client.finish(jobs[0])
    assert client.get(added.id) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_add_reserve_finish_over_tls_by_ip_and_by_name(
    kind: str, host: str, tls_memory_server: Server, certs: Certs, topic: str, no_env: Any
) -> None:
    client = make(kind, f"{host}:{tls_memory_server.port}", tls=True,
                  tls_ca_file=certs.path("ca.pem"))
    try:
        lifecycle(client, topic)
    finally:
        client.close()


def test_waiting_reserve_over_tls_takes_a_job_added_meanwhile(
    kind: str, tls_memory_server: Server, certs: Certs, topic: str, no_env: Any
) -> None:
    opts = {"tls": True, "tls_ca_file": certs.path("ca.pem")}
    client = make(kind, tls_memory_server.address, **opts)
    producer = delayq.Client(tls_memory_server.address, **opts)
    got: list = []
    t = threading.Thread(target=lambda: got.extend(client.reserve(topic, wait_ms=10_000)))
    try:
        t.start()
        # Whether the add lands before or during the wait, the reserve takes it.
        added = producer.add(topic, b"x")
        t.join(10)
        assert not t.is_alive()
        assert [j.id for j in got] == [added.id]
        client.finish(got[0])
    finally:
        producer.close()
        client.close()


def test_failover_goes_on_to_a_tls_server_past_a_dead_one(
    tls_memory_server: Server, certs: Certs, topic: str, no_env: Any
) -> None:
    from conftest import free_port

    with delayq.Client([f"127.0.0.1:{free_port()}", tls_memory_server.address], tls=True,
                       tls_ca_file=certs.path("ca.pem")) as client:
        lifecycle(client, topic)


def test_environment_turns_tls_on(
    kind: str, tls_memory_server: Server, certs: Certs, topic: str, no_env: pytest.MonkeyPatch
) -> None:
    no_env.setenv("DELAYQ_SERVER", tls_memory_server.address)
    no_env.setenv("DELAYQ_TLS", "yes")
    no_env.setenv("DELAYQ_CACERT", certs.path("ca.pem"))
    client = make(kind)
    try:
        lifecycle(client, topic)
    finally:
        client.close()


def test_environment_tls_off_values_and_an_explicit_argument_winning(
    certs: Certs, no_env: pytest.MonkeyPatch
) -> None:
    for off in ("0", "no", "false"):
        no_env.setenv("DELAYQ_TLS", off)
        assert delayq.Client()._config.tls is None
    no_env.setenv("DELAYQ_TLS", "1")
    assert delayq.Client()._config.tls is not None
    assert delayq.Client(tls=False)._config.tls is None
    no_env.setenv("DELAYQ_CACERT", certs.path("ca.pem"))
    assert delayq.Client()._config.tls.ca_file == certs.path("ca.pem")  # type: ignore[union-attr]
    other = certs.path("other-ca.pem")
    assert delayq.Client(tls_ca_file=other)._config.tls.ca_file == other  # type: ignore[union-attr]


def test_a_server_the_ca_did_not_sign_is_refused(
    kind: str, certs: Certs, topic: str, no_env: Any
) -> None:
    stranger = tls_server(certs, "stranger")
    client = make(kind, stranger.address, tls=True, tls_ca_file=certs.path("ca.pem"))
    try:
        with pytest.raises(delayq.UnavailableError) as e:
            client.add(topic, b"x")
        assert f"{stranger.address} (TLS: certificate verify failed: " in str(e.value)
        assert "unable to get local issuer certificate" in str(e.value)
    finally:
        client.close()
        stranger.stop()


def test_a_certificate_not_for_the_address_host_is_refused(
    certs: Certs, topic: str, no_env: Any
) -> None:
    named = tls_server(certs, "named-server")  # DNS:localhost, no IP address
    opts = {"tls": True, "tls_ca_file": certs.path("ca.pem")}
    try:
        with delayq.Client(f"localhost:{named.port}", **opts) as client:
            client.ping()
        with delayq.Client(f"127.0.0.1:{named.port}", **opts) as client:
            with pytest.raises(delayq.UnavailableError, match="TLS: certificate verify failed: "
                               "IP address mismatch"):
                client.ping()
    finally:
        named.stop()


def test_plaintext_client_on_a_tls_port_fails(tls_memory_server: Server, no_env: Any) -> None:
    with delayq.Client(tls_memory_server.address, request_timeout=2) as client:
        with pytest.raises(delayq.DelayqError):
            client.ping()


def test_mutual_tls_with_the_client_certificate(
    kind: str, mtls_server: Server, certs: Certs, topic: str, no_env: Any
) -> None:
    client = make(kind, mtls_server.address, tls=True, tls_ca_file=certs.path("ca.pem"),
                  tls_cert_file=certs.path("client.pem"), tls_key_file=certs.path("client.key"))
    try:
        lifecycle(client, topic)
    finally:
        client.close()


def test_mutual_tls_certificate_from_the_environment(
    mtls_server: Server, certs: Certs, topic: str, no_env: pytest.MonkeyPatch
) -> None:
    no_env.setenv("DELAYQ_TLS", "true")
    no_env.setenv("DELAYQ_CACERT", certs.path("ca.pem"))
    no_env.setenv("DELAYQ_CERT", certs.path("client.pem"))
    no_env.setenv("DELAYQ_KEY", certs.path("client.key"))
    with delayq.Client(mtls_server.address) as client:
        lifecycle(client, topic)


def test_mutual_tls_without_a_client_certificate_is_refused(
    kind: str, mtls_server: Server, certs: Certs, no_env: Any
) -> None:
    client = make(kind, mtls_server.address, tls=True, tls_ca_file=certs.path("ca.pem"))
    try:
        refused = f"no delayq server answered: {mtls_server.address} \\(TLS: tlsv13 alert " \
            "certificate required"
        with pytest.raises(delayq.UnavailableError, match=refused):
            client.ping()
        # Refused at the connect, so a reserve was not sent ("may have run").
        with pytest.raises(delayq.UnavailableError, match=refused):
            client.reserve("t", wait_ms=100)
    finally:
        client.close()


def test_worker_of_a_sync_client_speaks_tls_too(
    tls_memory_server: Server, certs: Certs, topic: str, no_env: Any
) -> None:
    client = delayq.Client(tls_memory_server.address, tls=True, tls_ca_file=certs.path("ca.pem"),
                           request_timeout=2)
    worker = delayq.Worker(client, concurrency=2)
    done: list = []
    worker.handle(topic, lambda job: done.append(job.id))

    async def run() -> None:
        await worker.start()
        try:
            added = client.add(topic, b"x")
            deadline = time.monotonic() + 10
            while worker.stats.succeeded < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert done == [added.id]
        finally:
            await worker.stop(drain=timedelta(seconds=2))

    try:
        asyncio.run(run())
        assert worker.stats.succeeded == 1 and worker.stats.errors == 0
    finally:
        client.close()


def test_cancelling_a_waiting_reserve_over_tls_withdraws_it_at_once(
    tls_memory_server: Server, certs: Certs, topic: str, no_env: Any
) -> None:
    async def run() -> None:
        async with delayq.AsyncClient(tls_memory_server.address, tls=True,
                                      tls_ca_file=certs.path("ca.pem")) as client:
            task = asyncio.ensure_future(client.reserve(topic, wait_ms=30_000))
            await client.ping()  # the reserve is on its way
            await asyncio.sleep(0)
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # Within far less than the request timeout (5 s): the server saw
            # the FIN under the TLS session, withdrew, and closed.
            assert time.monotonic() - t0 < 2
            added = await client.add(topic, b"x")
            jobs = await client.reserve(topic)
            assert [j.id for j in jobs] == [added.id]

    asyncio.run(run())


def test_option_errors(certs: Certs, no_env: pytest.MonkeyPatch) -> None:
    ca, cert, key = certs.path("ca.pem"), certs.path("client.pem"), certs.path("client.key")
    for kwargs, message in [
        ({"tls_ca_file": ca}, "tls_ca_file given without tls"),
        ({"tls_cert_file": cert, "tls_key_file": key}, "tls_cert_file given without tls"),
        ({"tls": False, "tls_key_file": key}, "tls_key_file given without tls"),
        ({"tls": True, "tls_cert_file": cert}, "tls_cert_file given without tls_key_file"),
        ({"tls": True, "tls_key_file": key}, "tls_key_file given without tls_cert_file"),
        ({"tls": True, "tls_ca_file": certs.path("nope.pem")},
         f"tls_ca_file: cannot read {certs.path('nope.pem')}: No such file or directory"),
    ]:
        for cls in (delayq.Client, delayq.AsyncClient):
            with pytest.raises(delayq.InvalidArgumentError) as e:
                cls("127.0.0.1:1", **kwargs)
            assert message in str(e.value), (kwargs, str(e.value))
    no_env.setenv("DELAYQ_CACERT", ca)
    with pytest.raises(delayq.InvalidArgumentError, match=r"tls_ca_file \(\$DELAYQ_CACERT\) given "
                       "without tls"):
        delayq.Client()
    no_env.setenv("DELAYQ_TLS", "1")
    no_env.setenv("DELAYQ_KEY", key)
    with pytest.raises(delayq.InvalidArgumentError, match="tls_key_file given without "
                       "tls_cert_file"):
        delayq.Client()
