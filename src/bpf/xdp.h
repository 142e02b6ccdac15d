/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * kpt_xdp: a fast path in front of tc ingress for traffic that enters the
 * node from outside, on the uplinks the proxy attaches it to (xdpattach.ts).
 * It handles two kinds of packets, and leaves everything else to tc
 * untouched (XDP_PASS), so it never changes a verdict the tc path gives:
 *  - a packet of a connection whose original direction tc ingress would
 *    translate (a kpt_ct entry without CT_REPLY or CT_AT_EGRESS): its
 *    destination is rewritten here;
 *  - the first packet of a connection to a NodePort, externalIP or load
 *    balancer address: balanced here with the steps of tc's balance()
 *    (lb.h), and its connection entries written exactly as tc ingress
 *    writes them, so every later packet (replies at egress included) finds
 *    them. A connection that keeps the client's address (eTP Local) gets
 *    the DNAT alone; one that is masqueraded (eTP Cluster) gets the DNAT
 *    here and the masquerade's two entries as well (masquerade_in, snat.h,
 *    the same code tc ingress runs): the source is still rewritten at tc
 *    egress towards the endpoint, after netfilter, so netfilter sees what it
 *    sees when tc balances the connection.
 * The one verdict of its own: a client that loadBalancerSourceRanges keep
 * out is dropped here (STAT_XDP_DROP), as tc would drop it.
 *
 * A SYN on the ports of a finished connection is what it is at tc: the old
 * connection's entries are forgotten and the SYN is a new flow.
 *
 * Left to tc: replies, entries translated at egress, rejects and
 * drops of every other kind, ClusterIPs, unallocated ServiceCIDR addresses,
 * IPv4 options and fragments, IPv6 extension headers, VLAN tags, and any
 * packet whose L4 checksum is only the pseudo-header sum (CHECKSUM_PARTIAL:
 * a veth peer's or GRO's packet): XDP cannot see skb->ip_summed, and only the
 * kernel's helpers at tc know how to fix such a checksum. A full checksum
 * that happens to equal the pseudo-header sum is passed too: harmless.
 *
 * A masqueraded connection's first packet is left to tc where XDP cannot
 * set the masquerade up as tc would: on a kernel whose bpf_fib_lookup
 * cannot say a route's source (before 6.7, unless backported), where tc
 * sets the mark netfilter masquerades by (asked before the endpoint's
 * choice, fib_has_src), and when no port is free among the ones tried.
 * With --ebpf-lb-mode=dsr every such first packet is left to tc, which
 * may send the connection by DSR instead (dsr.h).
 * (Entries an older version made carry CT_MASQ: their SYNs and datagrams
 * still go to tc for the mark netfilter masqueraded by.)
 *
 * tc ingress then sees the packet with the endpoint as destination. XDP
 * translates only when tc would let that packet go untouched (tc_leaves),
 * so no packet is translated twice.
 */
#ifndef KPT_XDP_H
#define KPT_XDP_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"
#include "lb.h"
#include "filter.h"

/* What the rewrite needs besides struct pkt. */
struct xdp_l4 {
	__u16 len;   /* L4 length from the IP header, for the pseudo-header sum */
	__u16 check; /* the L4 checksum field as it is in the packet */
};

/* 0: a TCP/UDP packet XDP may handle; -1: leave it to tc. Direct packet access only. */
static __always_inline int xdp_parse(struct xdp_md *ctx, struct pkt *p, struct xdp_l4 *l)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 *l4;
	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return -1;
		if (ip->version != 4 || ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
			return -1;
		if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
			return -1;
		__u16 tot = bpf_ntohs(ip->tot_len);
		if (tot < sizeof(*ip) + sizeof(struct udphdr))
			return -1;
		p->v6 = 0;
		p->proto = ip->protocol;
		p->ihl = sizeof(*ip);
		p->l4off = ETH_HLEN + sizeof(*ip);
		addr_from_v4(&p->saddr, ip->saddr);
		addr_from_v4(&p->daddr, ip->daddr);
		l->len = tot - sizeof(*ip);
		l4 = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return -1;
		if (ip6->nexthdr != IPPROTO_TCP && ip6->nexthdr != IPPROTO_UDP)
			return -1;
		p->v6 = 1;
		p->proto = ip6->nexthdr;
		p->ihl = 0;
		p->l4off = ETH_HLEN + sizeof(*ip6);
		__builtin_memcpy(p->saddr.b, &ip6->saddr, 16);
		__builtin_memcpy(p->daddr.b, &ip6->daddr, 16);
		l->len = bpf_ntohs(ip6->payload_len);
		l4 = (void *)(ip6 + 1);
	} else {
		return -1;
	}
	if (p->proto == IPPROTO_TCP) {
		struct tcphdr *th = (void *)l4;
		if ((void *)(th + 1) > end)
			return -1;
		p->sport = th->source;
		p->dport = th->dest;
		p->tcp_flags = l4[13];
		l->check = th->check;
	} else {
		struct udphdr *uh = (void *)l4;
		if ((void *)(uh + 1) > end)
			return -1;
		p->sport = uh->source;
		p->dport = uh->dest;
		p->tcp_flags = 0;
		l->check = uh->check;
	}
	return 0;
}

/* Ones' complement arithmetic on raw 16-bit words (as loaded: the sum's byte order is the packet's). */
static __always_inline __u16 xdp_fold(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

static __always_inline __u64 word_sum(__u32 w)
{
	return (w & 0xffff) + (w >> 16);
}

static __always_inline __u64 addr_sum(const union kpt_addr *a, int v6)
{
	if (!v6)
		return word_sum(a->w[3]);
	return word_sum(a->w[0]) + word_sum(a->w[1]) + word_sum(a->w[2]) + word_sum(a->w[3]);
}

/* The checksum field holds only the pseudo-header sum: CHECKSUM_PARTIAL (see the top). */
static __always_inline int csum_partial_only(const struct pkt *p, const struct xdp_l4 *l)
{
	if (p->proto == IPPROTO_UDP && !p->v6 && l->check == 0)
		return 0; /* no checksum at all */
	__u64 s = addr_sum(&p->saddr, p->v6) + addr_sum(&p->daddr, p->v6) + bpf_htons((__u16)p->proto) +
		  bpf_htons(l->len);
	__u16 f = xdp_fold(s);
	return l->check == f || (f == 0xffff && l->check == 0);
}

/* RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), with `delta` the sum of ~m + m' over the changed words. */
static __always_inline __u16 csum_apply(__u16 check, __u64 delta)
{
	return ~xdp_fold((__u16)~check + delta);
}

static __always_inline __u64 addr_delta(const union kpt_addr *from, const union kpt_addr *to, int v6)
{
	if (!v6)
		return word_sum(~from->w[3]) + word_sum(to->w[3]);
	__u64 d = 0;
	for (int i = 0; i < 4; i++)
		d += word_sum(~from->w[i]) + word_sum(to->w[i]);
	return d;
}

/*
 * 1 when tc ingress would leave the packet, as it will be after the rewrite,
 * untouched, so XDP may translate it: tc's first check lets it go, or else
 * the full look tc would take finds nothing to do (a connection entry only
 * for the egress hook, or none and the endpoint neither a service or node
 * address nor inside a ServiceCIDR).
 * The first check answers for most endpoints; the lookups run only for an
 * endpoint whose bits collide in the first check's bitmaps.
 */
static __always_inline int tc_leaves(const struct pkt *p, const union kpt_addr *to, __be16 port)
{
	struct pkt q = *p;
	q.daddr = *to;
	q.dport = port;
	if (!filter_maybe_ours(&q))
		return 1;
	struct ct_key k;
	ct_key_of(&q, &k);
	struct ct_value *e = bpf_map_lookup_elem(&kpt_ct, &k);
	if (e) /* an entry for the egress hook (a masquerade's, snat.h): tc ingress finds it and leaves the packet */
		return (e->flags & CT_AT_EGRESS) != 0;
	if (bpf_map_lookup_elem(&kpt_addrs, to))
		return 0;
	struct lpm_key c = { .prefixlen = 128, .addr = *to };
	return !bpf_map_lookup_elem(&kpt_svc_cidrs, &c);
}

/*
 * Rewrite the destination to to:port with the checksums fixed. Returns -1,
 * having changed nothing, when the packet is not as xdp_parse left it.
 */
static __always_inline int xdp_dnat(struct xdp_md *ctx, struct pkt *p, const union kpt_addr *to, __be16 port)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 d = addr_delta(&p->daddr, to, p->v6);
	__u64 dp = word_sum((__u16)~p->dport) + port;
	/* The L4 header's bound, checked before the first write, covers the IP header in front of it; the
	 * IP header's own checks below are for the verifier, which does not relate the two. Each protocol
	 * has its own path: the verifier does not relate two tests of p->proto either. */
	__u32 l4off = ETH_HLEN + (p->v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	struct iphdr *ip = data + ETH_HLEN;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	if (p->proto == IPPROTO_TCP) {
		struct tcphdr *th = data + l4off;
		if ((void *)(th + 1) > end)
			return -1;
		th->check = csum_apply(th->check, d + dp);
		th->dest = port;
	} else {
		struct udphdr *uh = data + l4off;
		if ((void *)(uh + 1) > end)
			return -1;
		/* IPv4 UDP without a checksum keeps none; a computed 0 is sent as its other form, 0xffff. */
		if (uh->check || p->v6) {
			__u16 c = csum_apply(uh->check, d + dp);
			uh->check = c ? c : 0xffff;
		}
		uh->dest = port;
	}
	if (!p->v6) {
		if ((void *)(ip + 1) > end)
			return -1;
		ip->check = csum_apply(ip->check, d);
		ip->daddr = to->w[3];
	} else {
		if ((void *)(ip6 + 1) > end)
			return -1;
		__builtin_memcpy(&ip6->daddr, to->b, 16);
	}
	p->daddr = *to;
	p->dport = port;
	return 0;
}

#define XDP_LEAVE (-1)      /* to tc, untouched: counted as STAT_XDP_PASS */
#define XDP_TRANSLATED (-2) /* rewritten, on to the stack (XDP_PASS) */
#define XDP_NEW_AGAIN (-3)  /* a SYN on the ports of a finished connection: forget it, balance anew */

static __always_inline __u32 xdp_len(struct xdp_md *ctx)
{
	return ctx->data_end - ctx->data;
}

/* A packet of a connection already balanced: translated here when tc ingress would translate it. */
static __always_inline int xdp_hit(struct xdp_md *ctx, struct pkt *p, struct ct_value *ct,
				   const struct cfg_value *cfg, const struct xdp_l4 *l)
{
	__u8 flags = ct->flags;
	if (flags & (CT_REPLY | CT_AT_EGRESS))
		return XDP_LEAVE;
	if (p->proto == IPPROTO_TCP && pure_syn(p) && (flags & CT_SEEN_ACK))
		return XDP_NEW_AGAIN; /* ports reused for a new connection, as tc ingress sees it */
	if ((flags & CT_UNMASQ) && (p->proto == IPPROTO_UDP || (p->tcp_flags & TCP_FLAG_SYN)))
		return XDP_LEAVE; /* a masquerade's reply entry may be stale: tc asks conntrack first */
	if ((flags & CT_UNMASQ) && (p->tcp_flags & (TCP_FLAG_FIN | TCP_FLAG_RST)))
		return XDP_LEAVE; /* tc notes how the connection ends, for the port's next claim (snat.h) */
	if ((flags & CT_DSR) && pure_syn(p))
		return XDP_LEAVE; /* a retransmitted SYN of a DSR connection: tc adds the option (dsr.h) */
	if ((flags & CT_MASQ) && (p->proto == IPPROTO_UDP || pure_syn(p)))
		return XDP_LEAVE; /* an older version's entry: conntrack may take it for new, it needs the mark */
	union kpt_addr a = ct->addr;
	__be16 port = ct->port;
	if (csum_partial_only(p, l) || !tc_leaves(p, &a, port))
		return XDP_LEAVE;
	seen_mark(SEEN_ORIG_DST, &p->daddr);
	if (xdp_dnat(ctx, p, &a, port) < 0)
		return XDP_LEAVE;
	if (p->proto == IPPROTO_TCP && !(flags & CT_SEEN_ACK) && (p->tcp_flags & TCP_FLAG_ACK))
		ct->flags |= CT_SEEN_ACK;
	stat_inc(STAT_XDP_HIT);
	traffic_add(cfg, ct->svc_id, 0, xdp_len(ctx));
	return XDP_TRANSLATED;
}

/* The first packet of a connection: balanced here when it is to a NodePort, externalIP or LB address. */
static __always_inline int xdp_new(struct xdp_md *ctx, struct pkt *p, const struct ct_key *key,
				   const struct cfg_value *cfg, const struct xdp_l4 *l)
{
	__u32 *af = bpf_map_lookup_elem(&kpt_addrs, &p->daddr);
	if (!af)
		return XDP_LEAVE;
	__u32 flags = *af;
	struct svc_value *svc = lookup_service(&p->daddr, p->dport, p->proto, p->v6, flags);
	if (!svc || svc->kind == KIND_CLUSTER_IP)
		return XDP_LEAVE;
	/* The same questions find_service asks at tc ingress, in the same order. */
	if ((flags & ADDR_LOCAL) && known_reply(ctx, 1, p))
		return XDP_LEAVE;
	if (netfilter_flow(ctx, 1, p))
		return XDP_LEAVE;
	if (csum_partial_only(p, l))
		return XDP_LEAVE;
	__u32 in = ctx->ingress_ifindex, set_id = 0;
	struct lb_result res = {};
	int v = balance_policy(in, cfg, svc, p, &set_id, &res.masq);
	if (v == V_DENY) {
		stat_inc(STAT_XDP_DROP);
		return XDP_DROP;
	}
	if (v != V_DNAT)
		return XDP_LEAVE; /* tc rejects */
	/* Before the endpoint's choice, which has side effects (a round-robin turn, an affinity entry): with
	 * --ebpf-lb-mode=dsr, tc may send such a connection by DSR instead (dsr.h), which XDP does not do;
	 * a kernel that cannot say a route's source (before 6.7, unless backported) masquerades through
	 * the mark tc sets. */
	if (res.masq && ((cfg->flags & CFG_DSR) || !fib_has_src(ctx)))
		return XDP_LEAVE;
	/* From here on as balance() goes on. Whatever leaves the packet to tc after the choice costs tc a
	 * second one; each such case is rare: a client that is an endpoint itself, an endpoint tc's first
	 * check would look at, no free masquerade port among the ones tried (which tc would drop), or a
	 * kernel whose FIB refuses BPF_FIB_LOOKUP_SRC after fib_has_src said it knows it. */
	res.svc_id = svc->svc_id;
	if (choose(svc, set_id, p, &res) != V_DNAT)
		return XDP_LEAVE;
	if (addr_eq(&p->saddr, &res.ep.addr) || !tc_leaves(p, &res.ep.addr, res.ep.port))
		return XDP_LEAVE;
	__u64 now = bpf_ktime_get_ns();
	union kpt_addr client = p->saddr, vip = p->daddr;
	__be16 vport = p->dport;
	/* The masquerade's two entries (snat.h), set up as tc ingress sets them up, on the packet as it
	 * will be after the DNAT: before it, so that a packet left to tc is left having written none.
	 * p stands for that packet meanwhile (a copy would not fit the stack). */
	int masq = 0;
	if (res.masq) {
		p->daddr = res.ep.addr;
		p->dport = res.ep.port;
		masq = masquerade_in(ctx, 1, p, now);
		p->daddr = vip;
		p->dport = vport;
		if (masq < 0 || masq == MASQ_BY_MARK)
			return XDP_LEAVE;
	}
	if (xdp_dnat(ctx, p, &res.ep.addr, res.ep.port) < 0) {
		if (masq) {
			struct ct_key out = { .saddr = client, .daddr = res.ep.addr, .sport = p->sport,
					      .dport = res.ep.port, .proto = p->proto };
			masquerade_forget(&out);
		}
		return XDP_LEAVE;
	}
	struct ct_value fwd = { .addr = res.ep.addr, .port = res.ep.port, .svc_id = res.svc_id, .created_ns = now };
	struct ct_key rk = { .saddr = res.ep.addr, .daddr = client, .sport = res.ep.port, .dport = p->sport,
			     .proto = p->proto };
	struct ct_value rev = { .addr = vip, .port = vport, .svc_id = res.svc_id, .created_ns = now };
	rev.flags = CT_REPLY | CT_AT_EGRESS;
	seen_mark(SEEN_REPLY_SRC, &res.ep.addr);
	seen_mark(SEEN_ORIG_DST, &vip);
	bpf_map_update_elem(&kpt_ct, &rk, &rev, BPF_ANY);
	bpf_map_update_elem(&kpt_ct, key, &fwd, BPF_ANY);
	stat_inc(STAT_XDP_NEW);
	traffic_add(cfg, res.svc_id, 1, xdp_len(ctx));
	return XDP_TRANSLATED;
}

SEC("xdp")
int kpt_xdp(struct xdp_md *ctx)
{
	struct pkt p;
	struct xdp_l4 l;
	if (xdp_parse(ctx, &p, &l) < 0)
		return XDP_PASS;
	__u32 fam = p.v6;
	struct cfg_value *cfg = bpf_map_lookup_elem(&kpt_cfg, &fam);
	if (!cfg || !(cfg->flags & CFG_ENABLED))
		return XDP_PASS;
	int r = XDP_LEAVE;
	if (filter_maybe_ours(&p)) {
		struct ct_key key;
		ct_key_of(&p, &key);
		struct ct_value *ct = bpf_map_lookup_elem(&kpt_ct, &key);
		r = ct ? xdp_hit(ctx, &p, ct, cfg, &l) : xdp_new(ctx, &p, &key, cfg, &l);
		if (r == XDP_NEW_AGAIN && ct) {
			/* What tc ingress does with it: the old connection's entries go, then the SYN is a new flow
			 * (which XDP may again leave to tc, which then finds no entry and balances it). A client that
			 * opens connection after connection reuses its ports soon, so this is most new connections. */
			forget_flow(&p, ct, &key);
			r = xdp_new(ctx, &p, &key, cfg, &l);
		}
	}
	if (r == XDP_LEAVE) {
		stat_inc(STAT_XDP_PASS);
		return XDP_PASS;
	}
	return r == XDP_TRANSLATED ? XDP_PASS : r;
}

#endif
