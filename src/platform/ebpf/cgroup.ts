// Socket-level load balancing hooks (--ebpf-socket-lb-cgroup): the cgroup
// sock_addr programs, attached with BPF links to one cgroup v2 directory and
// pinned (links/cgroup-<hook>). Processes in that cgroup and below are
// served, in the node's network namespace and in pods' (src/bpf/sock.h says
// what they leave to the tc programs). The directory is resolved first
// (cgroupdir.ts).
import { closeSync, constants, openSync, statSync } from 'node:fs';
import { BpfError, closeFd, libbpf } from './libbpf.js';
import type { PinDir } from './pins.js';
import type { ProgramName } from './object.js';
import { linkInfo, progInfo } from './attach.js';

/** Program -> bpf_attach_type (uapi enum values). */
export const CGROUP_HOOKS: ReadonlyArray<readonly [ProgramName, string, number]> = [
  ['kpt_connect4', 'connect4', 10],
  ['kpt_connect6', 'connect6', 11],
  ['kpt_sendmsg4', 'sendmsg4', 14],
  ['kpt_sendmsg6', 'sendmsg6', 15],
  ['kpt_recvmsg4', 'recvmsg4', 19],
  ['kpt_recvmsg6', 'recvmsg6', 20],
  ['kpt_getpeername4', 'getpeername4', 29],
  ['kpt_getpeername6', 'getpeername6', 30],
];

/**
 * Attach (or swap in) every socket program on cgroupPath. An existing pinned
 * link is updated in place; a link left for another cgroup is replaced.
 */
export function attachCgroup(pins: PinDir, cgroupPath: string, program: (p: ProgramName) => number): string[] {
  const lib = libbpf();
  const dirFd = openSync(cgroupPath, constants.O_RDONLY | constants.O_DIRECTORY);
  const cgroupId = BigInt(statSync(cgroupPath).ino); // a cgroup v2 id is its directory's inode
  const done: string[] = [];
  try {
    for (const [prog, hook, type] of CGROUP_HOOKS) {
      const fd = program(prog);
      const path = pins.cgroupLink(hook);
      const pinned = lib.bpf_obj_get(path);
      if (pinned >= 0) {
        try {
          const li = linkInfo(pinned);
          if (li.cgroupId === cgroupId) {
            if (li.progId !== progInfo(fd).id) {
              const rc = lib.bpf_link_update(pinned, fd, null);
              if (rc < 0) throw new BpfError(`update ${hook} link`, -rc);
            }
            done.push(hook);
            continue;
          }
        } finally {
          closeFd(pinned);
        }
        pins.detachLink(path); // attached to another cgroup: move it
      }
      const link = lib.bpf_link_create(fd, dirFd, type, null);
      if (link < 0) throw new BpfError(`attach ${hook} to ${cgroupPath}`, -link);
      try {
        const rc = lib.bpf_obj_pin(link, path);
        if (rc < 0) throw new BpfError(`pin ${path}`, -rc);
      } finally {
        closeFd(link);
      }
      done.push(hook);
    }
  } finally {
    closeSync(dirFd);
  }
  return done;
}

/** Detach and unpin every cgroup link of ours. */
export function detachCgroup(pins: PinDir): string[] {
  const out: string[] = [];
  for (const name of pins.links()) {
    if (!name.startsWith('cgroup-')) continue;
    pins.detachLink(`${pins.linksDir}/${name}`);
    out.push(name);
  }
  return out;
}
