import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeArgv } from './argv.js';
import { parseGoFloat, parseGoInt, parseGoUint32, parseStringSlice, parseVModule } from './flagvalues.js';
import { splitHostPort, appendPortIfNeeded } from '../core/config/hostport.js';

test('parseGoInt follows strconv.ParseInt(s, 0, 32)', () => {
  assert.equal(parseGoInt('14'), 14);
  assert.equal(parseGoInt('-999'), -999);
  assert.equal(parseGoInt('+7'), 7);
  assert.equal(parseGoInt('0x1F'), 31);
  assert.equal(parseGoInt('010'), 8, 'leading zero is octal');
  assert.equal(parseGoInt('0o17'), 15);
  assert.equal(parseGoInt('0b101'), 5);
  assert.equal(parseGoInt('0'), 0);
  assert.equal(parseGoInt('2147483647'), 2147483647);
  assert.throws(() => parseGoInt('2147483648'), /value out of range/);
  assert.throws(() => parseGoInt('1.5'), /invalid syntax/);
  assert.throws(() => parseGoInt(''), /invalid syntax/);
  assert.throws(() => parseGoInt('09'), /invalid syntax/);
  assert.throws(() => parseGoInt('1_000'), /invalid syntax/, 'underscores need a base prefix');
});

test('parseGoUint32 and parseGoFloat', () => {
  assert.equal(parseGoUint32('4'), 4);
  assert.throws(() => parseGoUint32('-1'), /invalid syntax/);
  assert.throws(() => parseGoUint32('4294967296'), /out of range/);
  assert.equal(parseGoFloat('5'), 5);
  assert.equal(parseGoFloat('7.5'), 7.5);
  assert.equal(parseGoFloat('1e2'), 100);
  assert.equal(parseGoFloat('0.1'), 0.1, 'kept as written');
  assert.throws(() => parseGoFloat('abc'), /invalid syntax/);
  assert.throws(() => parseGoFloat('1e99'), /out of range/, 'float32 overflow');
});

test('parseStringSlice is pflag CSV', () => {
  assert.deepEqual(parseStringSlice(''), []);
  assert.deepEqual(parseStringSlice('a,b'), ['a', 'b']);
  assert.deepEqual(parseStringSlice('"a,b",c'), ['a,b', 'c']);
  assert.deepEqual(parseStringSlice('a,,b'), ['a', '', 'b']);
  assert.throws(() => parseStringSlice('"a'), /parse error/);
});

test('parseVModule reads pattern=N lists', () => {
  assert.deepEqual(parseVModule('proxier=4,healthcheck*=2'), [
    { filePattern: 'proxier', verbosity: 4 },
    { filePattern: 'healthcheck*', verbosity: 2 },
  ]);
  assert.throws(() => parseVModule('proxier'), /pattern=N/);
  assert.throws(() => parseVModule('proxier=x'), /pattern=N/);
});

test('normalizeArgv rewrites pflag syntax into --name=value', () => {
  assert.deepEqual(normalizeArgv(['--cleanup', '--config', 'f', '-v', '2', '-h', 'x', '--', '--y']), {
    tokens: ['--cleanup=true', '--config=f', '--v=2', '--help=true'],
    positional: ['x', '--y'],
  });
  assert.deepEqual(normalizeArgv(['-hv=3']).tokens, ['--help=true', '--v=3']);
  assert.deepEqual(normalizeArgv(['-v5']).tokens, ['--v=5']);
  assert.deepEqual(
    normalizeArgv(['--hostname-override', '--cleanup']).tokens,
    ['--hostname-override=--cleanup'],
    'a value flag takes the next argument whatever it looks like, as pflag',
  );
  assert.throws(() => normalizeArgv(['-v']), /flag needs an argument: 'v' in -v/);
  assert.throws(() => normalizeArgv(['--nope=1']), /unknown flag: --nope/);
});

test('splitHostPort and appendPortIfNeeded follow Go', () => {
  assert.deepEqual(splitHostPort('0.0.0.0:10256'), { host: '0.0.0.0', port: '10256' });
  assert.deepEqual(splitHostPort('[::]:10256'), { host: '::', port: '10256' });
  assert.deepEqual(splitHostPort(':80'), { host: '', port: '80' });
  assert.equal(splitHostPort('0.0.0.0'), null);
  assert.equal(splitHostPort('::1'), null);
  assert.equal(splitHostPort('[::1]'), null);
  assert.equal(splitHostPort('[::1]x:80'), null);
  assert.equal(appendPortIfNeeded('10.0.0.1', 80), '10.0.0.1:80');
  assert.equal(appendPortIfNeeded('fd00::1', 80), '[fd00::1]:80');
  assert.equal(appendPortIfNeeded('10.0.0.1:90', 80), '10.0.0.1:90');
  assert.equal(appendPortIfNeeded('bogus', 80), 'bogus');
});
