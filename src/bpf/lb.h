/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The first packet of a flow to a service address: find the service, apply
 * its traffic policies, choose an endpoint. The TypeScript tracer
 * (src/dataplane/ebpf/trace.ts) follows these same steps over the same map
 * contents; keep the two in step.
 */
#ifndef KPT_LB_H
#define KPT_LB_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"

enum verdict {
	V_PASS = 0,   /* not a service packet: leave it alone */
	V_DNAT = 1,   /* balanced: lb_result holds the endpoint */
	V_REJECT = 2, /* no endpoints: answer with ICMP port unreachable */
	V_DROP = 3,
	V_DENY = 4,   /* loadBalancerSourceRanges keep this client out: dropped */
};

struct lb_result {
	struct ep_value ep;
	__u32 svc_id;
	__u8 masq;
};

/* The 32-bit mix of Bob Jenkins' lookup3 (the kernel's jhash). */
#define rol32(x, k) (((x) << (k)) | ((x) >> (32 - (k))))
#define jmix(a, b, c)                                                                              \
	{                                                                                          \
		a -= c; a ^= rol32(c, 4); c += b;                                                  \
		b -= a; b ^= rol32(a, 6); a += c;                                                  \
		c -= b; c ^= rol32(b, 8); b += a;                                                  \
		a -= c; a ^= rol32(c, 16); c += b;                                                 \
		b -= a; b ^= rol32(a, 19); a += c;                                                 \
		c -= b; c ^= rol32(b, 4); b += a;                                                  \
	}
#define jfinal(a, b, c)                                                                            \
	{                                                                                          \
		c ^= b; c -= rol32(b, 14);                                                         \
		a ^= c; a -= rol32(c, 11);                                                         \
		b ^= a; b -= rol32(a, 25);                                                         \
		c ^= b; c -= rol32(b, 16);                                                         \
		a ^= c; a -= rol32(c, 4);                                                          \
		b ^= a; b -= rol32(a, 14);                                                         \
		c ^= b; c -= rol32(b, 24);                                                         \
	}

#define KPT_HASH_SEED 0x6b707473 /* fixed, so every node maps a flow to the same Maglev entry */

/* Hash of the client: its address and, unless addr_only, its source port
 * (Maglev), or its address alone (source hashing). Nothing of the service
 * address is in it, so a flow entering through any node (a NodePort on each
 * node's own address) hashes alike. The tracer computes the same value
 * (src/dataplane/ebpf/hash.ts). */
static __always_inline __u32 client_hash(const struct pkt *p, int addr_only)
{
	__u32 a, b, c;
	a = b = c = 0xdeadbeef + ((addr_only ? 4 : 5) << 2) + KPT_HASH_SEED;
	a += p->saddr.w[0]; b += p->saddr.w[1]; c += p->saddr.w[2];
	jmix(a, b, c);
	a += p->saddr.w[3];
	if (!addr_only)
		b += p->sport;
	jfinal(a, b, c);
	return c;
}

/* The service entry for (daddr, dport, proto) given daddr's flags in kpt_addrs:
 * its own entry, else the NodePort entry when daddr serves NodePorts. */
static __always_inline struct svc_value *lookup_service(const union kpt_addr *daddr, __be16 dport, __u8 proto,
							int v6, __u32 addr_flags)
{
	struct svc_key k = { .addr = *daddr, .port = dport, .proto = proto };
	struct svc_value *svc = 0;
	if (addr_flags & ADDR_SERVICE)
		svc = bpf_map_lookup_elem(&kpt_svc, &k);
	if (!svc && (addr_flags & ADDR_NODEPORT)) {
		k.addr.w[0] = k.addr.w[1] = k.addr.w[3] = 0; /* the family's "any" address */
		k.addr.w[2] = v6 ? 0 : bpf_htonl(0xffff);
		svc = bpf_map_lookup_elem(&kpt_svc, &k);
	}
	return svc;
}

/* in_ifindex: the interface the packet entered through, 0 when the node sent it (egress). */
static __always_inline int src_is_pod(__u32 in_ifindex, const struct cfg_value *cfg, const struct pkt *p)
{
	if (cfg->flags & CFG_DETECT_CIDR) {
		struct lpm_key k = { .prefixlen = 128, .addr = p->saddr };
		return bpf_map_lookup_elem(&kpt_pod_cidrs, &k) != 0;
	}
	if ((cfg->flags & CFG_DETECT_IFACE) && in_ifindex) {
		struct iface_key k = { .ifindex = in_ifindex, .family = p->v6 };
		__u32 *f = bpf_map_lookup_elem(&kpt_ifaces, &k);
		return f && (*f & IFACE_POD);
	}
	return 0;
}

static __always_inline int src_is_local(const struct pkt *p)
{
	__u32 *f = bpf_map_lookup_elem(&kpt_addrs, &p->saddr);
	return f && (*f & ADDR_LOCAL);
}

/* The endpoint a remembered affinity points at, if it is still in set_id. */
static __always_inline int affinity_hit(const struct svc_value *svc, __u32 set_id, const struct pkt *p,
					struct ep_value *out, __u64 now)
{
	struct aff_key ak = { .client = p->saddr, .svc_id = svc->svc_id };
	struct aff_value *av = bpf_map_lookup_elem(&kpt_affinity, &ak);
	if (!av)
		return 0;
	if (now - av->last_ns > (__u64)svc->affinity_secs * 1000000000ull)
		return 0;
	struct member_key mk = { .set_id = set_id, .port = av->port, .addr = av->addr };
	if (!bpf_map_lookup_elem(&kpt_members, &mk))
		return 0;
	out->addr = av->addr;
	out->port = av->port;
	return 1;
}

static __always_inline int pick_slot(const struct svc_value *svc, __u32 set_id, struct set_value *set,
				     const struct pkt *p, __u32 *slot)
{
	if (svc->algo == ALGO_MAGLEV || svc->algo == ALGO_SOURCE_HASH) {
		__u16 *lut = bpf_map_lookup_elem(&kpt_maglev, &set_id);
		if (!lut)
			return -1;
		__u32 m = maglev_m; /* a constant to the verifier: .rodata is frozen */
		__u32 idx = client_hash(p, svc->algo == ALGO_SOURCE_HASH) % m;
		/* The verifier does not bound a remainder; this comparison does.
		 * The empty asm keeps clang from deleting it as redundant. */
		asm volatile("" : "+r"(idx));
		if (idx >= m)
			return -1;
		*slot = lut[idx];
	} else if (svc->algo == ALGO_ROUND_ROBIN) {
		/* One counter per endpoint set in the map value, shared by every CPU:
		 * the atomic add hands out each turn exactly once, so connections
		 * opened one after another cycle through the slots in order, however
		 * the CPUs take them. (Only the wrap at 2^32 skips part of a cycle.) */
		*slot = __sync_fetch_and_add(&set->rr_next, 1) % set->count;
	} else {
		*slot = bpf_get_prandom_u32() % set->count;
	}
	return 0;
}

/*
 * Choose an endpoint of set_id for p. Returns V_DNAT with res->ep set, or
 * V_DROP when the set is empty (a Local policy without local endpoints).
 */
static __always_inline int choose(const struct svc_value *svc, __u32 set_id, const struct pkt *p,
				  struct lb_result *res)
{
	struct set_value *set = set_id ? bpf_map_lookup_elem(&kpt_sets, &set_id) : 0;
	if (!set || set->count == 0)
		return V_DROP;
	__u64 now = bpf_ktime_get_ns();
	if (svc->affinity_secs && affinity_hit(svc, set_id, p, &res->ep, now))
		goto remember;
	__u32 slot;
	if (pick_slot(svc, set_id, set, p, &slot) < 0)
		return V_DROP;
	struct ep_key ek = { .set_id = set_id, .slot = slot };
	struct ep_value *ep = bpf_map_lookup_elem(&kpt_eps, &ek);
	if (!ep)
		return V_DROP;
	res->ep = *ep;
remember:
	if (svc->affinity_secs) {
		struct aff_key ak = { .client = p->saddr, .svc_id = svc->svc_id };
		struct aff_value av = { .addr = res->ep.addr, .port = res->ep.port, .last_ns = now };
		bpf_map_update_elem(&kpt_affinity, &ak, &av, BPF_ANY);
	}
	return V_DNAT;
}

/*
 * Which endpoint set serves this packet, and whether it is masqueraded
 * (upstream's KUBE-SVC / KUBE-EXT / KUBE-SVL split, written as data):
 *  - internal (ClusterIP): iTP Local -> local set, else cluster set;
 *    masquerade with masqueradeAll, or when a local detector exists and
 *    the source is not a local pod;
 *  - external, eTP Cluster: cluster set, always masquerade;
 *  - external, eTP Local: a local pod short-circuits to the cluster set
 *    unmasqueraded; the node itself gets the cluster set masqueraded;
 *    everyone else the local set with the client address kept.
 * in_ifindex: the interface the packet entered through (tc ingress, XDP),
 * 0 for a packet the node sends (tc egress). Nothing else of the packet's
 * context is read, so tc and XDP share this. balance_policy() is the part
 * before the endpoint is chosen, which XDP asks first (xdp.h).
 */
static __always_inline int balance_policy(__u32 in_ifindex, const struct cfg_value *cfg,
					  const struct svc_value *svc, const struct pkt *p, __u32 *set_id, __u8 *masq)
{
	int external = svc->kind != KIND_CLUSTER_IP;
	int pod = cfg->flags & (CFG_DETECT_CIDR | CFG_DETECT_IFACE) ? src_is_pod(in_ifindex, cfg, p) : 0;

	/* The source-range firewall comes first, as in nftables mode, where it
	 * runs before the no-endpoints verdicts. */
	if (svc->kind == KIND_LOAD_BALANCER && (svc->flags & SVC_SOURCE_RANGES)) {
		struct lpm_svc_key k = { .prefixlen = 32 + 128, .svc_id = bpf_htonl(svc->svc_id), .addr = p->saddr };
		if (!bpf_map_lookup_elem(&kpt_lb_src, &k))
			return V_DENY;
	}
	if (svc->flags & SVC_NO_ENDPOINTS)
		return V_REJECT;
	if (!external) {
		*set_id = (svc->flags & SVC_LOCAL_POLICY) ? svc->local_set : svc->cluster_set;
		*masq = (cfg->flags & CFG_MASQ_ALL) || ((cfg->flags & (CFG_DETECT_CIDR | CFG_DETECT_IFACE)) && !pod);
	} else if (!(svc->flags & SVC_LOCAL_POLICY)) {
		*set_id = svc->cluster_set;
		*masq = 1;
	} else if (pod) {
		*set_id = svc->cluster_set;
		*masq = 0;
	} else if (src_is_local(p)) {
		*set_id = svc->cluster_set;
		*masq = 1;
	} else {
		*set_id = svc->local_set;
		*masq = 0;
	}
	return V_DNAT;
}

/* The policy, then the endpoint: V_DNAT with res filled in, or the verdict. */
static __always_inline int balance(__u32 in_ifindex, const struct cfg_value *cfg, const struct svc_value *svc,
				   const struct pkt *p, struct lb_result *res)
{
	__u32 set_id = 0;
	int v = balance_policy(in_ifindex, cfg, svc, p, &set_id, &res->masq);
	if (v != V_DNAT)
		return v;
	res->svc_id = svc->svc_id;
	v = choose(svc, set_id, p, res);
	if (v == V_DNAT && addr_eq(&p->saddr, &res->ep.addr))
		res->masq = 1; /* hairpin: the endpoint reaches itself, so it must see another source */
	return v;
}

#endif
