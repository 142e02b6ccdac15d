/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Every map of the datapath. The proxy pins them under its pin directory
 * (maps/<name>) and reuses them when it restarts, so a connection keeps its
 * endpoint across a restart. Sizes here are defaults; the loader may change
 * max_entries (and the Maglev value size) before the object is loaded.
 */
#ifndef KPT_MAPS_H
#define KPT_MAPS_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "abi.h"

/* Maglev table size, a prime. The loader sets it before load and sizes the
 * kpt_maglev value to match (2 bytes per entry); .rodata is frozen at load,
 * so the verifier knows the value and can bound the table index. */
const volatile __u32 maglev_m = 16381;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_svc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, union kpt_addr);
	__type(value, __u32);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct set_value);
	__uint(max_entries, 524288);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct ep_key);
	__type(value, struct ep_value);
	__uint(max_entries, 1048576);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_eps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct member_key);
	__type(value, __u32);
	__uint(max_entries, 1048576);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_members SEC(".maps");

/* set_id -> __u16[maglev_m]: slot of the endpoint owning each table entry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__uint(value_size, 2 * 16381);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_maglev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct aff_key);
	__type(value, struct aff_value);
	__uint(max_entries, 65536);
} kpt_affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lpm_svc_key);
	__type(value, __u8);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_lb_src SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lpm_key);
	__type(value, __u8);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_pod_cidrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lpm_key);
	__type(value, __u8);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_svc_cidrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct iface_key);
	__type(value, __u32);
	__uint(max_entries, 65536);
} kpt_ifaces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct cfg_value);
	__uint(max_entries, 2);
} kpt_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_value);
	__uint(max_entries, 262144);
} kpt_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct sock_key);
	__type(value, struct sock_value);
	__uint(max_entries, 65536);
} kpt_sock SEC(".maps");

/* svc_id -> service-port name: what explain and diff print; the programs never read it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct name_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, STAT_MAX);
} kpt_stats SEC(".maps");

/* Sized for both families' caps together; the proxy never asks for more. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, __u32);
	__type(value, struct traffic_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} kpt_traffic SEC(".maps");

/* The ports of datagrams whose first fragment was ours (frag.h). Fragments of one datagram arrive within
 * moments; the LRU forgets the rest. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag_key);
	__type(value, struct frag_value);
	__uint(max_entries, 8192);
} kpt_frag SEC(".maps");

/* The first check's bitmaps (abi.h, filter.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 2 * HOT_STRIDE);
} kpt_hot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1 + 2 * SEEN_WORDS);
} kpt_seen SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&kpt_stats, &idx);
	if (v)
		*v += 1;
}

/* One packet of the original direction of a connection to svc_id, and
 * whether it opened the connection. Nothing at all without CFG_TRAFFIC.
 * Per-CPU values: plain adds, no atomics. skb->len counts from the
 * Ethernet header at tc (every device we attach to has one). */
static __always_inline void traffic_add(const struct cfg_value *cfg, __u32 svc_id, __u64 conns, __u32 skb_len)
{
	if (!(cfg->flags & CFG_TRAFFIC))
		return;
	struct traffic_value *t = bpf_map_lookup_elem(&kpt_traffic, &svc_id);
	if (!t)
		return;
	t->conns += conns;
	t->bytes += skb_len > ETH_HLEN ? skb_len - ETH_HLEN : 0;
}

#endif
