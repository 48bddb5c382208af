// TLS for the server stores' Node drivers, as the Rust clients have it (lock-store/src/tls.rs):
// each store reads its own ecosystem's URL parameters (`rediss://` with `cacert`, `sslmode=`,
// `ssl-mode=`); what they share is here: the files read into Node's TLS options, the server's
// certificate always checked (its chain up to Node's roots or the URL's CA file, and its host
// name unless the URL asks for the chain only), and a failed check said as the Rust clients say it.

import { readFileSync } from 'node:fs';

/**
 * `url` without the query parameters named in `names`, and theirs (decoded): the client libraries
 * do not know these parameters; the drivers read them (as `take_params` in tls.rs).
 * @returns {{ rest: string, params: Map<string, string> }}
 */
export function takeParams(url, names) {
  const hash = url.indexOf('#');
  const [base, fragment] = hash < 0 ? [url, ''] : [url.slice(0, hash), url.slice(hash)];
  const question = base.indexOf('?');
  if (question < 0) return { rest: url, params: new Map() };
  const kept = [];
  const params = new Map();
  for (const pair of base.slice(question + 1).split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const [name, value] = equals < 0 ? [pair, ''] : [pair.slice(0, equals), pair.slice(equals + 1)];
    if (names.includes(name)) params.set(name, decodeURIComponent(value));
    else kept.push(pair);
  }
  const path = base.slice(0, question);
  return { rest: `${path}${kept.length > 0 ? `?${kept.join('&')}` : ''}${fragment}`, params };
}

/**
 * Node's TLS options: the server's certificate checked against `ca` (a file; Node's built-in
 * roots without one) and, unless `chainOnly`, its host name; the client's `cert` and `key` files
 * for a server that asks for them. `bad(reason)` makes the error for a file that cannot be read.
 * @param {{ ca?: string, cert?: string, key?: string, chainOnly?: boolean }} files
 * @param {(reason: string) => Error} bad
 * @param {{ ca: string, cert: string, key: string }} names the parameters' names, for messages
 */
export function tlsOptions({ ca, cert, key, chainOnly = false }, bad, names) {
  if ((cert === undefined) !== (key === undefined)) throw bad(`${names.cert} and ${names.key} go together`);
  const read = (name, path) => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (error) {
      throw bad(`${name}: cannot read ${path}: ${/** @type {Error} */ (error).message}`);
    }
  };
  /** @type {import('node:tls').ConnectionOptions} */
  const options = { rejectUnauthorized: true, ca: read(names.ca, ca), cert: read(names.cert, cert), key: read(names.key, key) };
  if (chainOnly) options.checkServerIdentity = () => undefined;
  return options;
}

/** Node's codes for a certificate no trusted CA signed. */
const UNTRUSTED = ['SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_UNTRUSTED', 'CERT_SIGNATURE_FAILURE'];

/**
 * A connection error's words, led by what a failed TLS check means when it is one, in the Rust
 * clients' words (`explain` in tls.rs): an untrusted CA, an expired certificate, a certificate
 * for another host, a client certificate the server wants.
 */
export function explain(error) {
  const e = /** @type {{ code?: unknown, message?: unknown, cause?: unknown }} */ (error ?? {});
  const message = String(e.message ?? error);
  const codes = [e.code, /** @type {{ code?: unknown }} */ (e.cause ?? {}).code].filter((c) => typeof c === 'string');
  const lower = message.toLowerCase();
  let why;
  if (codes.some((c) => UNTRUSTED.includes(c)) || lower.includes('self-signed certificate') || lower.includes('unable to verify') || lower.includes('unable to get')) {
    why = "the server's certificate is not signed by a CA this client trusts (name the CA's file in the URL)";
  } else if (codes.some((c) => c === 'CERT_HAS_EXPIRED' || c === 'CERT_NOT_YET_VALID') || lower.includes('certificate has expired')) {
    why = "the server's certificate has expired (or is not valid yet)";
  } else if (codes.includes('ERR_TLS_CERT_ALTNAME_INVALID') || lower.includes("does not match certificate's altnames")) {
    why = "the server's certificate is for another host name";
  } else if (codes.some((c) => c.includes('CERTIFICATE_REQUIRED')) || lower.includes('certificate required')) {
    why = 'the server asks for a client certificate (name it and its key in the URL)';
  } else {
    return message;
  }
  return `TLS: ${why}: ${message}`;
}
