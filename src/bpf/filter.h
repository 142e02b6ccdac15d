/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The first check of every packet at the tc hooks: most packets through a
 * node (pod to pod, or a connection balanced at the socket, whose packets
 * carry the endpoint's address from the start) are none of the programs'
 * business, and each full look at them (the connection map, the service
 * addresses, the ServiceCIDR trie) costs three hash or trie lookups. A packet
 * needs the full look only when
 *  - its destination is in kpt_addrs (a service address, or a node address:
 *    NodePorts, replies to the node) or inside a ServiceCIDR (the drop of
 *    an unallocated address): kpt_hot, kept by the proxy;
 *  - it may belong to a connection in kpt_ct: an original entry's key has
 *    the service address as destination, a reply entry's the endpoint as
 *    source, and the programs mark both in kpt_seen when they create the
 *    entries. The marks outlive kpt_addrs, so a connection keeps working
 *    after its Service is removed or the mode retired (handover), as it did
 *    when the connection map was always looked up first.
 * The check is a few array reads and multiplications: both maps are arrays,
 * whose lookups the verifier turns into pointer arithmetic.
 */
#ifndef KPT_FILTER_H
#define KPT_FILTER_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"

#define FILTER_MUL 0x9e3779b1u /* Knuth's multiplicative hash: the golden ratio in 32 bits */
#define FILTER_MIX 0x85ebca6bu /* murmur3's first finalizer constant */
#define FILTER_SEED 0x6b707473u
#define FILTER_BUCKET_SALT 0x5bd1e995u

/* The top `log` bits of x times the multiplier: the bit's index. */
static __always_inline __u32 filter_hash(__u32 x, int log)
{
	return (x * FILTER_MUL) >> (32 - log);
}

/* One word into the running hash. Words are taken as a little-endian host loads them. A plain XOR of
 * the words would not do: fd00:1::1 and fd00:2::2 fold to the same value. */
static __always_inline __u32 filter_mix(__u32 h, __u32 w)
{
	h = (h ^ w) * FILTER_MIX;
	return (h << 13) | (h >> 19);
}

static __always_inline __u32 addr_fold(const union kpt_addr *a)
{
	return filter_mix(filter_mix(filter_mix(filter_mix(FILTER_SEED, a->w[0]), a->w[1]), a->w[2]), a->w[3]);
}

/* The bucket an address falls in for the ServiceCIDR test: its IPv4 /16 or IPv6 /64. */
static __always_inline __u32 bucket_fold(const union kpt_addr *a, int v6)
{
	if (v6)
		return filter_mix(filter_mix(FILTER_BUCKET_SALT, a->w[0]), a->w[1]);
	return filter_mix(filter_mix(FILTER_BUCKET_SALT, a->w[2]), a->w[3] & bpf_htonl(0xffff0000));
}

static __always_inline int hot_bit(__u32 base, __u32 h)
{
	__u32 idx = base + 1 + (h >> 6);
	__u64 *w = bpf_map_lookup_elem(&kpt_hot, &idx);
	return w && (*w & (1ull << (h & 63)));
}

/* region 0: reply sources, 1: original destinations. */
static __always_inline __u64 *seen_word(int region, const union kpt_addr *a, __u64 *bit)
{
	__u32 h = filter_hash(addr_fold(a), SEEN_BITS_LOG);
	__u32 idx = 1 + region * SEEN_WORDS + (h >> 6);
	*bit = 1ull << (h & 63);
	return bpf_map_lookup_elem(&kpt_seen, &idx);
}

static __always_inline int seen_bit(int region, const union kpt_addr *a)
{
	__u64 bit;
	__u64 *w = seen_word(region, a, &bit);
	return w && (*w & bit);
}

static __always_inline void seen_mark(int region, const union kpt_addr *a)
{
	__u64 bit;
	__u64 *w = seen_word(region, a, &bit);
	/* Read first: the bit is nearly always set already, and a plain read keeps the cache line shared. */
	if (w && !(*w & bit))
		__sync_fetch_and_or(w, bit);
}

#define SEEN_REPLY_SRC 0
#define SEEN_ORIG_DST 1

/* 1: the packet may be ours, look at it in full; 0: leave it alone. */
static __always_inline int filter_maybe_ours(const struct pkt *p)
{
	__u32 base = p->v6 ? HOT_STRIDE : 0;
	__u64 *hdr = bpf_map_lookup_elem(&kpt_hot, &base);
	if (!hdr || !(*hdr & HOT_VALID) || (*hdr & HOT_ALL))
		return 1;
	if (hot_bit(base, filter_hash(addr_fold(&p->daddr), HOT_BITS_LOG)) ||
	    hot_bit(base, filter_hash(bucket_fold(&p->daddr, p->v6), HOT_BITS_LOG)))
		return 1;
	__u32 zero = 0;
	__u64 *seen = bpf_map_lookup_elem(&kpt_seen, &zero);
	if (!seen || !(*seen & SEEN_COMPLETE))
		return 1;
	return seen_bit(SEEN_REPLY_SRC, &p->saddr) || seen_bit(SEEN_ORIG_DST, &p->daddr);
}

#endif
