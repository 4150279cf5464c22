// TLS to `delayq serve --tls-cert-file ...`: the client's options and their
// environment variables, a whole job's life over TLS (a waiting reserve's
// connection and failover past a dead address included), the server's
// certificate checked against the CA and the address's host, mutual TLS
// with and without a client certificate, and the options that do not fit.
// Certificates: support/certs.mjs (openssl).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, InternalError, InvalidArgumentError, UnavailableError, Worker } from '../index.js';
import { makeCerts } from './support/certs.mjs';
import { freePort, poll, startDelayq } from './support/servers.mjs';

let seq = 0;
const topicName = () => `node.tls.${process.pid}.${++seq}`;

let certs;
let server;  // TLS, no client certificates asked for
let mutual;  // TLS, client certificates signed by ca.pem required
const clients = [];
// A client closed after the file's tests.
const open = options => {
  const c = new Client(options);
  clients.push(c);
  return c;
};

before(async () => {
  certs = makeCerts();
  const tls = { certFile: certs.path('server.pem'), keyFile: certs.path('server.key') };
  [server, mutual] = await Promise.all([
    startDelayq({ tls }),
    startDelayq({ tls: { ...tls, caFile: certs.path('ca.pem') } }),
  ]);
});
after(async () => {
  await Promise.all(clients.map(c => c.close()));
  await Promise.all([server?.stop(), mutual?.stop()]);
  certs?.remove();
});

// Runs fn with these environment variables set (undefined: unset), then puts them back.
async function withEnv(vars, fn) {
  const saved = {};
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('over TLS', () => {
  test('add, a waiting reserve, finish: by IP address and by name', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      const client = open({ servers: `${host}:${server.port}`, tls: true, tlsCaFile: certs.path('ca.pem') });
      const t = topicName();
      const waiting = client.reserve([t], { wait: '5s' });  // on a connection of its own
      const { id } = await client.add(t, { host });
      const [job] = await waiting;
      assert.equal(job.id, id);
      assert.deepEqual(job.json(), { host });
      await client.finish(job);
      assert.equal(await client.get(id), null);
    }
  });

  test('failover past an address that refuses, to a TLS server', async () => {
    const dead = `127.0.0.1:${await freePort()}`;
    const client = open({ servers: [dead, server.address], tls: true, tlsCaFile: certs.path('ca.pem') });
    const { id } = await client.add(topicName(), 'x');
    assert.equal((await client.get(id)).text(), 'x');
  });

  test('a worker handles jobs over mutual TLS', async () => {
    const client = open({
      servers: mutual.address, tls: true, tlsCaFile: certs.path('ca.pem'),
      tlsCertFile: certs.path('client.pem'), tlsKeyFile: certs.path('client.key'),
    });
    const t = topicName();
    const done = [];
    const worker = new Worker(client, {
      reserveWait: '5s',
      onAcknowledged: (job, kind, error) => done.push([job.id, kind, error]),
    });
    worker.handle(t, () => {});
    await worker.start();
    const { id } = await client.add(t, 'x');
    await poll(() => done.length === 1, 5000, 'the finish');
    await worker.stop({ drain: 1000 });
    assert.deepEqual(done, [[id, 'finish', null]]);
  });

  test('the environment: DELAYQ_TLS, DELAYQ_CACERT, DELAYQ_CERT, DELAYQ_KEY', async () => {
    await withEnv({
      DELAYQ_SERVER: mutual.address, DELAYQ_TLS: 'yes', DELAYQ_CACERT: certs.path('ca.pem'),
      DELAYQ_CERT: certs.path('client.pem'), DELAYQ_KEY: certs.path('client.key'),
    }, async () => {
      assert.equal(await open().ping(), 'PONG');
      // an option given wins over its variable
      const err = await open({ tlsCaFile: certs.path('other-ca.pem') }).ping().catch(e => e);
      assert.ok(err instanceof UnavailableError, err.stack);
      assert.match(err.message, /TLS: the server's certificate was not accepted/);
    });
    for (const off of ['0', 'no', 'false']) {
      await withEnv({ DELAYQ_SERVER: server.address, DELAYQ_TLS: off }, async () => {
        // plaintext to a TLS port: the server says so
        await assert.rejects(open().ping(), { constructor: InternalError, message: /this port speaks TLS/ });
      });
    }
    await withEnv({ DELAYQ_SERVER: server.address, DELAYQ_TLS: '1', DELAYQ_CACERT: certs.path('ca.pem') },
      async () => assert.equal(await open().ping(), 'PONG'));
  });
});

describe("the server's certificate", () => {
  test('signed by another CA, or checked against the system trust store: refused, saying why', async () => {
    const other = await startDelayq({ tls: { certFile: certs.path('other-server.pem'), keyFile: certs.path('other-server.key') } });
    try {
      for (const c of [
        { servers: other.address, tls: true, tlsCaFile: certs.path('ca.pem') },
        { servers: server.address, tls: true },
      ]) {
        const err = await open(c).add(topicName(), 'x').catch(e => e);
        assert.ok(err instanceof UnavailableError, err.stack);
        assert.match(err.message, /^no delayq server answered: 127\.0\.0\.1:\d+ \(TLS: the server's certificate was not accepted \(is it signed by the CA in tlsCaFile\?\): .*certificate/);
      }
    } finally {
      await other.stop();
    }
  });

  test('for another host name: refused, naming the address checked', async () => {
    const elsewhere = await startDelayq({ tls: { certFile: certs.path('elsewhere.pem'), keyFile: certs.path('elsewhere.key') } });
    try {
      for (const host of ['127.0.0.1', 'localhost']) {
        const err = await open({ servers: `${host}:${elsewhere.port}`, tls: true, tlsCaFile: certs.path('ca.pem') }).ping().catch(e => e);
        assert.ok(err instanceof UnavailableError, err.stack);
        assert.match(err.message, new RegExp(`TLS: the server's certificate was not accepted: Hostname/IP does not match .*${host.replaceAll('.', '\\.')}`));
      }
    } finally {
      await elsewhere.stop();
    }
  });
});

describe('mutual TLS', () => {
  test('without a client certificate, or with one another CA signed: refused, saying why', async () => {
    for (const [cert, reason] of [[undefined, 'certificate required'], ['other-client', 'unknown ca']]) {
      const client = open({
        servers: mutual.address, tls: true, tlsCaFile: certs.path('ca.pem'),
        tlsCertFile: cert && certs.path(`${cert}.pem`), tlsKeyFile: cert && certs.path(`${cert}.key`),
      });
      const err = await client.add(topicName(), 'x').catch(e => e);
      assert.ok(err instanceof UnavailableError, err.stack);
      assert.match(err.message, new RegExp(`TLS: the server refused the handshake \\(.*${reason}\\): it wants a client certificate its CA signed \\(tlsCertFile, tlsKeyFile\\)`));
    }
  });
});

describe('options that do not fit', () => {
  test('a file without tls; a certificate without its key, or the reverse; not a boolean', async () => {
    const ca = certs.path('ca.pem');
    const cases = [
      [{ tlsCaFile: ca }, 'tlsCaFile given without tls (or DELAYQ_TLS=1): it is for TLS only'],
      [{ tls: false, tlsCertFile: ca, tlsKeyFile: ca }, 'tlsCertFile given without tls (or DELAYQ_TLS=1): it is for TLS only'],
      [{ tls: true, tlsCertFile: certs.path('client.pem') }, 'tlsCertFile given without tlsKeyFile'],
      [{ tls: true, tlsKeyFile: certs.path('client.key') }, 'tlsKeyFile given without tlsCertFile'],
      [{ tls: 'yes' }, 'tls: expected true or false, got "yes"'],
      [{ tls: true, tlsCaFile: '' }, 'tlsCaFile: expected a file name, got ""'],
    ];
    for (const [options, message] of cases) {
      assert.throws(() => new Client({ servers: server.address, ...options }), { constructor: InvalidArgumentError, message });
    }
    await withEnv({ DELAYQ_TLS: undefined, DELAYQ_CACERT: ca }, () => {
      assert.throws(() => new Client(server.address), {
        constructor: InvalidArgumentError,
        message: 'tlsCaFile ($DELAYQ_CACERT) given without tls (or DELAYQ_TLS=1): it is for TLS only',
      });
    });
    await withEnv({ DELAYQ_TLS: 'true', DELAYQ_KEY: certs.path('client.key') }, () => {
      assert.throws(() => new Client(server.address), { constructor: InvalidArgumentError, message: 'tlsKeyFile ($DELAYQ_KEY) given without tlsCertFile' });
    });
  });

  test('a file that cannot be read, a key that is not the certificate\'s: named', () => {
    const missing = certs.path('missing.pem');
    assert.throws(() => new Client({ servers: server.address, tls: true, tlsCaFile: missing }), {
      constructor: InvalidArgumentError, message: new RegExp(`^tlsCaFile: cannot read ${missing}: ENOENT`),
    });
    assert.throws(() => new Client({
      servers: server.address, tls: true, tlsCertFile: certs.path('client.pem'), tlsKeyFile: certs.path('server.key'),
    }), { constructor: InvalidArgumentError, message: /^TLS: .*key.* \(tlsCertFile .*client\.pem, tlsKeyFile .*server\.key\)$/ });
  });
});
