// CPU seconds of this process and of its waited-for children (Linux
// /proc/self/stat cutime + cstime). The machine this runs on is shared, so
// wall times swing with load; CPU time is the contention-robust measure.
import { readFileSync } from 'node:fs';

const CLK_TCK = 100; // sysconf(_SC_CLK_TCK) on Linux

export interface CpuSample {
  readonly selfS: number;
  readonly childrenS: number;
}

export function cpuNow(): CpuSample {
  const u = process.cpuUsage();
  // Fields after the ")" of comm: state is field 3; cutime/cstime are fields 16/17.
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const childrenS = (Number(f[13]) + Number(f[14])) / CLK_TCK;
  return { selfS: (u.user + u.system) / 1e6, childrenS };
}

export function cpuSince(a: CpuSample): CpuSample {
  const b = cpuNow();
  return { selfS: b.selfS - a.selfS, childrenS: b.childrenS - a.childrenS };
}
