/** Free loopback TCP ports, for the private servers that tests, benchmarks and chaos runs start. */
import net from 'node:net';

/** A port that was free a moment ago (the OS picks it; a caller should bind it soon). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
