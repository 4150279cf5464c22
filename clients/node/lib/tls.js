// TLS to the servers (their --tls-cert-file): the client's options, checked
// as the delayq command checks --tls --cacert --cert --key, and read once
// into one secure context that every connection to every server shares.
// Each connection checks the server's certificate against the CA (else
// Node's trust store) and against the host of its own address: tls.connect
// takes the host as the name to check (a DNS name, or an IP address SAN).
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { InvalidArgumentError } from './errors.js';
import { describe } from './validate.js';

const FILES = [
  ['tlsCaFile', 'DELAYQ_CACERT'],
  ['tlsCertFile', 'DELAYQ_CERT'],
  ['tlsKeyFile', 'DELAYQ_KEY'],
];

/**
 * The TLS settings of a Client from its options, each defaulting to the
 * environment variable the delayq command reads: ioredis's `tls` option
 * ({secureContext}), or undefined when TLS is off. Throws
 * InvalidArgumentError naming the option (and the variable it came from).
 */
export function tlsSettings(options, env) {
  let on = options.tls;
  if (on === undefined) {
    const v = env.DELAYQ_TLS || '';
    on = v !== '' && v !== '0' && v !== 'no' && v !== 'false';
  } else if (typeof on !== 'boolean') {
    throw new InvalidArgumentError(`tls: expected true or false, got ${describe(on)}`);
  }
  const files = {};
  const names = {};
  for (const [name, variable] of FILES) {
    let value = options[name];
    names[name] = name;
    if (value === undefined && env[variable]) {
      value = env[variable];
      names[name] = `${name} ($${variable})`;
    }
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new InvalidArgumentError(`${name}: expected a file name, got ${describe(value)}`);
    }
    if (value !== undefined && !on) {
      throw new InvalidArgumentError(`${names[name]} given without tls (or DELAYQ_TLS=1): it is for TLS only`);
    }
    files[name] = value;
  }
  if (!on) return undefined;
  if ((files.tlsCertFile === undefined) !== (files.tlsKeyFile === undefined)) {
    throw new InvalidArgumentError(files.tlsCertFile === undefined
      ? `${names.tlsKeyFile} given without tlsCertFile`
      : `${names.tlsCertFile} given without tlsKeyFile`);
  }
  const read = name => {
    if (files[name] === undefined) return undefined;
    try {
      return readFileSync(files[name]);
    } catch (err) {
      throw new InvalidArgumentError(`${names[name]}: cannot read ${files[name]}: ${err.message}`);
    }
  };
  const ca = read('tlsCaFile');
  const cert = read('tlsCertFile');
  const key = read('tlsKeyFile');
  try {
    return { secureContext: createSecureContext({ ca, cert, key }) };
  } catch (err) {
    const given = FILES.filter(([name]) => files[name] !== undefined).map(([name]) => `${names[name]} ${files[name]}`);
    throw new InvalidArgumentError(`TLS: ${err.message} (${given.join(', ')})`);
  }
}

/**
 * Why a TLS connection failed, for messages: what OpenSSL or the
 * certificate check said, under "TLS: ..."; other errors (a refused
 * connect, a timeout) as they are.
 * @param {Error & {code?: string, syscall?: string, library?: string, reason?: string}} err
 */
export function tlsReason(err) {
  if (err.library === 'SSL routines' && typeof err.reason === 'string') {
    if (!err.reason.includes('alert')) return `TLS: ${err.reason}`;
    const hint = /certificate required|unknown ca|bad certificate|certificate unknown/.test(err.reason)
      ? ': it wants a client certificate its CA signed (tlsCertFile, tlsKeyFile)' : '';
    return `TLS: the server refused the handshake (${err.reason})${hint}`;
  }
  if (typeof err.code === 'string' && !err.syscall && /CERT|UNABLE_TO|SELF_SIGNED|INVALID_CA|HOSTNAME/.test(err.code)) {
    const hint = err.code === 'ERR_TLS_CERT_ALTNAME_INVALID' ? '' : ' (is it signed by the CA in tlsCaFile?)';
    return `TLS: the server's certificate was not accepted${hint}: ${err.message}`;
  }
  return err.message;
}
