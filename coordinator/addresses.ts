// The addresses people can use to reach this coordinator: every non-loopback interface
// address (and the host name's .local name, which most LANs resolve by mDNS), as join URLs.
import { hostname, networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { urlHost } from './ice.ts';

const WILDCARDS = new Set(['0.0.0.0', '::', '']);
export const isLoopbackHost = (h: string): boolean => h === 'localhost' || h === '::1' || /^127\./.test(h);

/** Non-internal addresses of this machine, IPv4 first; link-local IPv6 (fe80::) left out. */
export function lanAddresses(ifaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string[] {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const list of Object.values(ifaces)) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv4') v4.push(a.address);
      else if (!/^fe80:/i.test(a.address)) v6.push(a.address);
    }
  }
  return [...new Set([...v4, ...v6])];
}

/**
 * The join URLs for a coordinator listening at host:port: for a wildcard listen every LAN
 * address (then `<hostname>.local`), else the one address; `query` (e.g. ?token=...) appended.
 */
export function joinUrls(listenHost: string, port: number, secure: boolean, query = '', addrs: string[] = lanAddresses(), name = hostname()): string[] {
  const scheme = secure ? 'https' : 'http';
  const hosts = WILDCARDS.has(listenHost) ? [...addrs, ...(name && /^[A-Za-z0-9-]+$/.test(name) ? [`${name}.local`] : [])] : [listenHost];
  if (hosts.length === 0) hosts.push('127.0.0.1');
  return hosts.map((h) => `${scheme}://${urlHost(h)}:${port}/${query}`);
}
