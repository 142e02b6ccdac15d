// The userspace Fake refuses what `nft -f` refuses and applies a script all-or-nothing; its
// listener table keeps a listener's port across endpoint changes, as the real listeners do.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Endpoint } from '../../core/types.js';
import { Fake, FIRST_FAKE_PORT } from './fake.js';
import type { ListenerSpec } from './plan.js';
import { renderCleanup } from './rules.js';

const T = 'ip kube-proxy-userspace';
const TABLE = `add table ${T}\nadd map ${T} m { type ipv4_addr . inet_proto . inet_service : inet_service ; }\nadd chain ${T} c\n`;

function refuses(fake: Fake, script: string, re: RegExp): void {
  const before = fake.dump();
  assert.throws(
    () => fake.run(script),
    (e: Error & { code?: string }) => e.code === 'KPT_EXEC_FAILED' && re.test(e.message),
  );
  assert.equal(fake.dump(), before, 'a refused script changes nothing');
}

const spec = (key: string, ...eps: string[]): ListenerSpec => ({
  key,
  servicePortKey: key,
  serviceKey: key,
  protocol: 'TCP',
  set: 'cluster',
  endpoints: eps.map((k) => ({ key: k }) as Endpoint),
  stickyMs: 0,
});

describe('userspace Fake', () => {
  it('applies a script whole; the next one replaces the table (add, delete, add)', () => {
    const f = new Fake('ip');
    f.run(TABLE + `add element ${T} m { 172.30.0.1 . tcp . 80 : 40000 }\n`);
    assert.equal(f.maps.get('m')!.elements.get('172.30.0.1 . tcp . 80'), '40000');
    f.run(`add table ${T}\ndelete table ${T}\n${TABLE}`);
    assert.equal(f.maps.get('m')!.elements.size, 0);
    f.run(renderCleanup('IPv4'));
    assert.equal(f.hasTable, false);
  });

  it('refuses what nft refuses, all-or-nothing', () => {
    const f = new Fake('ip');
    refuses(f, `add chain ${T} c\n`, /No such file or directory \(table\)/);
    refuses(f, `delete table ${T}\n`, /No such file or directory/);
    f.run(TABLE);
    refuses(f, `add element ${T} m { 172.30.0.9 . tcp . 80 : 1 }\nadd rule ${T} nope drop\n`, /chain nope/);
    refuses(f, `add rule ${T} c jump missing\n`, /chain missing/);
    refuses(f, `add rule ${T} c ip daddr @missing drop\n`, /set missing/);
    refuses(f, `add element ${T} nope { 1.2.3.4 }\n`, /set nope/);
    refuses(f, `add element ${T} m { 172.30.0.1 . tcp : 40000 }\n`, /does not match type/);
    refuses(f, `add element ${T} m { 172.30.0.1 . tcp . 80 : 70000 }\n`, /bad port/);
    refuses(f, `add element ${T} m { 172.30.0.1 . tcp . 80 : 1, 172.30.0.1 . tcp . 80 : 2 }\n`, /File exists/);
    refuses(f, `add chain ${T} c { type nat hook output priority -100 ; }\n`, /base chain/);
    refuses(f, `add map ${T} m { type ipv4_addr : verdict ; }\n`, /different type/);
    refuses(f, `add table ip6 kube-proxy-userspace\n`, /family ip6/);
    refuses(f, `add table ip other\n`, /only table kube-proxy-userspace/);
    refuses(f, `frobnicate\n`, /syntax error/);
  });

  it('a verdict map checks its verdicts; a prefix needs an interval set', () => {
    const f = new Fake('ip');
    f.run(
      `add table ${T}\nadd chain ${T} reject-chain\nadd map ${T} v { type inet_proto . inet_service : verdict ; }\n`,
    );
    f.run(`add element ${T} v { tcp . 80 : goto reject-chain, udp . 53 : drop }\n`);
    refuses(f, `add element ${T} v { tcp . 81 : goto nowhere }\n`, /chain nowhere/);
    refuses(f, `add element ${T} v { tcp . 82 : maybe }\n`, /bad verdict/);
    f.run(`add set ${T} s { type ipv4_addr ; }\n`);
    refuses(f, `add element ${T} s { 10.0.0.0/8 }\n`, /without flags interval/);
    f.run(`add set ${T} i { type ipv4_addr ; flags interval ; }\nadd element ${T} i { 10.0.0.0/8 }\n`);
    assert.ok(f.maps.get('i')!.interval);
  });

  it('a listener keeps its port while open and takes new endpoints', () => {
    const f = new Fake('ip');
    const a = f.listen(spec('a', '10.0.0.1:80'));
    const b = f.listen(spec('b', '10.0.0.2:80'));
    assert.deepEqual([a, b], [FIRST_FAKE_PORT, FIRST_FAKE_PORT + 1]);
    assert.equal(f.listen(spec('a', '10.0.0.1:80', '10.0.0.3:80')), a);
    assert.deepEqual(f.listenerOn('TCP', a)!.endpoints, ['10.0.0.1:80', '10.0.0.3:80']);
    assert.equal(f.listenerOn('UDP', a), undefined);
    f.close('a');
    assert.equal(f.listenerOn('TCP', a), undefined);
    assert.match(f.dump(), /^listener tcp :40001 b -> 10\.0\.0\.2:80$/m);
  });
});
