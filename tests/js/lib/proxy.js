// A TCP proxy on 127.0.0.1 in front of a store server, for the Node clients' fault tests: it
// passes bytes both ways until told to go silent (a path that drops everything without closing:
// the sockets stay open, nothing arrives), to hold the server's answers back (requests still
// reach it: a write done whose answer never comes) or to reset every connection.

import net from 'node:net';

export class Proxy {
  #server;
  /** @type {Set<import('node:net').Socket>} */
  #sockets;
  /** @type {{silent: boolean, stalled: boolean}} */
  #state;

  constructor(server, sockets, state) {
    this.#server = server;
    this.#sockets = sockets;
    this.#state = state;
  }

  /** A proxy to `host:port`, listening on a free port of 127.0.0.1. */
  static async start(host, port) {
    const sockets = new Set();
    const state = { silent: false, stalled: false };
    const server = net.createServer((client) => {
      const upstream = net.connect(port, host);
      for (const [from, to, answers] of [
        [client, upstream, false],
        [upstream, client, true],
      ]) {
        sockets.add(from);
        from.on('data', (chunk) => {
          if (!state.silent && !(answers && state.stalled)) to.write(chunk);
        });
        from.on('error', () => to.destroy());
        from.on('close', () => {
          sockets.delete(from);
          to.destroy();
        });
      }
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new Proxy(server, sockets, state);
  }

  /** The port clients connect to. */
  get port() {
    return /** @type {import('node:net').AddressInfo} */ (this.#server.address()).port;
  }

  /** `url` with its host and port replaced by the proxy's. */
  url(url) {
    return url.replace(/\/\/([^@/]*@)?[^/:?]+(:\d+)?/, (_, user) => `//${user ?? ''}127.0.0.1:${this.port}`);
  }

  /** Drops every byte from now on (both ways), keeping the connections open; or passes again. */
  silent(on) {
    this.#state.silent = on;
  }

  /** Drops the server's answers from now on (requests still reach it); or passes them again. */
  stallReplies(on) {
    this.#state.stalled = on;
  }

  /** Resets every connection (new ones are accepted). */
  reset() {
    for (const socket of this.#sockets) socket.resetAndDestroy();
  }

  async close() {
    this.reset();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}
