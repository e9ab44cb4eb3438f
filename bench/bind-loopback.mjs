/**
 * Preload (`node --import ./bench/bind-loopback.mjs …`) that makes a server which listens on a
 * bare port bind 127.0.0.1 instead of every interface. supergateway 4.0.0 has no host option
 * (`app.listen(port)`); the benchmark must not open a port to the network.
 */
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  else if (args[0] && typeof args[0] === 'object' && !args[0].path && args[0].host === undefined) args[0] = { ...args[0], host: '127.0.0.1' };
  return listen.apply(this, args);
};
