// Certificates for the TLS tests, made with the openssl command in a
// temporary directory as tests/integration/tls_test.py's Certs makes them:
// an EC P-256 CA; a server certificate for localhost and 127.0.0.1, one for
// another name only, and a client certificate (clientAuth), signed by it;
// and another CA with a server and a client of its own. (node --test also loads this file as a
// test file: it has none.)
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './servers.mjs';

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** Makes them; `path(name)` is a file's path ("ca.pem", "server.key"), `remove()` deletes them. */
export function makeCerts() {
  const { dir, remove } = tempDir('delayq-node-tls-');
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ca = (name, cn) => openssl('req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.pem`,
    '-days', '30', '-subj', `/CN=${cn}`);
  const leaf = (name, signer, cn, ext) => {
    openssl('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    writeFileSync(path.join(dir, `${name}.ext`), `${ext}\n`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${signer}.pem`, '-CAkey', `${signer}.key`,
      '-CAcreateserial', '-out', `${name}.pem`, '-days', '30', '-extfile', `${name}.ext`);
  };
  ca('ca', 'delayq test CA');
  ca('other-ca', 'another CA');
  leaf('server', 'ca', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1');
  leaf('elsewhere', 'ca', 'elsewhere.test', 'subjectAltName=DNS:elsewhere.test');
  leaf('other-server', 'other-ca', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1');
  leaf('client', 'ca', 'worker-1', 'extendedKeyUsage=clientAuth');
  leaf('other-client', 'other-ca', 'stranger', 'extendedKeyUsage=clientAuth');
  return { dir, path: name => path.join(dir, name), remove };
}
