import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nodeIPList, pickUplinks } from './xdpattach.js';
import { ARPHRD_ETHER, ARPHRD_LOOPBACK, type Iface } from './ifaces.js';

const iface = (index: number, name: string, extra: Partial<Iface> = {}): Iface => ({
  index,
  name,
  type: ARPHRD_ETHER,
  master: 0,
  up: true,
  ...extra,
});

test('uplinks are the Ethernet interfaces that are up and hold a node IP', () => {
  const ifaces = [
    iface(1, 'lo', { type: ARPHRD_LOOPBACK }),
    iface(2, 'eth0'),
    iface(3, 'eth1'),
    iface(4, 'veth1a2b'), // a pod veth: holds the pod gateway, not a node IP
    iface(5, 'eth2', { up: false }),
  ];
  const addresses = {
    lo: [{ address: '127.0.0.1' }, { address: '192.168.77.11' }],
    eth0: [{ address: '192.168.77.11' }, { address: 'fe80::1' }],
    eth1: [{ address: '2001:DB8::0:11' }],
    veth1a2b: [{ address: '10.244.1.1' }],
    eth2: [{ address: '192.168.77.11' }],
  };
  const ips = nodeIPList({ IPv4: '192.168.77.11', IPv6: '2001:db8::11' });
  assert.deepEqual(ips, ['192.168.77.11', '2001:db8::11']);
  assert.deepEqual(
    pickUplinks(ifaces, addresses, ips).map((i) => i.name),
    ['eth0', 'eth1'],
    'IPv6 compared in normal form; loopback, pod veths and interfaces that are down never',
  );
  assert.deepEqual(pickUplinks(ifaces, addresses, []), [], 'no node IP known yet: no uplink');
  assert.deepEqual(pickUplinks(ifaces, addresses, ['not an ip']), []);
});
