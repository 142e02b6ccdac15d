/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Masquerade of a connection that entered the node (a NodePort, an external
 * or load-balancer IP with externalTrafficPolicy Cluster, a ClusterIP reached
 * from outside the pod network, a pod reaching itself), done by the programs
 * instead of netfilter. The connection's source becomes the address the
 * route to the endpoint prefers (what MASQUERADE picks) and a port of our own.
 *
 * Where, so that netfilter still sees one consistent connection:
 *  - DNAT stays at ingress (tc, or XDP in front of it), before netfilter:
 *    netfilter sees client -> endpoint;
 *  - the source is rewritten at tc egress of the interface towards the
 *    endpoint, after netfilter: only the wire sees node:port -> endpoint;
 *  - the endpoint's replies get their destination back (the client's
 *    address and port) at tc ingress, before netfilter, which so sees
 *    endpoint -> client, the reply it expects; the reply entry of the
 *    connection then rewrites their source at egress as before.
 * Two more connection entries do it, both of kinds the programs already
 * translate: a reply-kind entry keyed client -> endpoint at egress (rewrite
 * the source to node:port) and an original-kind entry keyed endpoint ->
 * node:port at ingress (rewrite the destination to the client; CT_UNMASQ).
 * The port is claimed by inserting the second with BPF_NOEXIST, so two CPUs
 * never pick the same one, and skipped when the kernel's conntrack knows
 * the tuple (netfilter masqueraded something onto it); an entry left from a
 * finished connection yields to netfilter the same way (ct_translate).
 *
 * Who sets the two entries up: tc ingress when it balances the connection,
 * or XDP in front of it on an uplink (xdp.h), which runs the same code with
 * its own context before it rewrites the packet; either way DNAT happens
 * before netfilter and the source rewrite at tc egress, so netfilter sees
 * the same connection.
 *
 * Ports come from below the kernel's default ephemeral range (32768-60999):
 * a tuple node:port -> endpoint we use must not be one a local socket picks
 * for itself later, and the kernel's choice of local ports does not know ours.
 *
 * Entries go when the LRU drops them or when the client reuses its port for
 * a new connection (forget_flow), so a busy client towards one endpoint
 * soon holds most of that endpoint's 31,744 ports with connections long
 * over, and the tries above find none free. So a TCP connection's FINs and
 * RSTs are noted in its reply entry (`closing`), and a port whose
 * connection is over is taken over when no try found a free one. UDP has
 * no close: its ports wait for the LRU or the client's next flow.
 */
#ifndef KPT_SNAT_H
#define KPT_SNAT_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"
#include "reply.h"
#include "filter.h"

/*
 * Whether the kernel's connection tracker has the tuple of k. An IPv6 ct_key starts with the layout of
 * the IPv6 socket tuple, so it is passed as it is; IPv4 needs a 12-byte one. (kpt_ingress and kpt_xdp,
 * where this is inlined, are close to the 512-byte stack limit.) ctx and xdp as for kernel_ct (kpt.c).
 */
static __always_inline int conntrack_knows(void *ctx, int xdp, struct ct_key *k, int v6)
{
	struct bpf_ct_opts o = { .netns_id = -1, .l4proto = k->proto };
	struct bpf_sock_tuple *t = (struct bpf_sock_tuple *)k;
	__u32 tsz = sizeof(t->ipv6);
	struct {
		__be32 saddr, daddr;
		__be16 sport, dport;
	} t4;
	if (!v6) {
		t4.saddr = k->saddr.w[3];
		t4.daddr = k->daddr.w[3];
		t4.sport = k->sport;
		t4.dport = k->dport;
		t = (struct bpf_sock_tuple *)&t4;
		tsz = sizeof(t4);
	}
	struct nf_conn *ct = ct_lookup(ctx, xdp, t, tsz, &o);
	if (!ct)
		return 0;
	bpf_ct_release(ct);
	return 1;
}

#define NAT_PORT_MIN 1024
#define NAT_PORT_SPAN (32768 - NAT_PORT_MIN)
#define NAT_PORT_TRIES 8

#define MASQ_BY_MARK 2

/* The connection of a masquerade's reply entry is over: both sides sent FIN, or one sent RST. */
static __always_inline int masquerade_closed(const struct ct_value *e)
{
	return (e->flags & CT_UNMASQ) && ((e->closing & CLOSE_RST) ||
					  (e->closing & (CLOSE_FIN_CLIENT | CLOSE_FIN_ENDPOINT)) ==
						  (CLOSE_FIN_CLIENT | CLOSE_FIN_ENDPOINT));
}

/* What a TCP packet says of its connection's end, as a CLOSE_* bit (0: nothing); fin: whose FIN it is. */
static __always_inline __u8 close_bit(const struct pkt *p, __u8 fin)
{
	if (p->proto != IPPROTO_TCP)
		return 0;
	if (p->tcp_flags & TCP_FLAG_RST)
		return CLOSE_RST;
	return (p->tcp_flags & TCP_FLAG_FIN) ? fin : 0;
}

/*
 * A client's packet on its way out to the endpoint, at the entry that
 * rewrites its source (client -> endpoint, value nat:port): a FIN or RST is
 * noted in the reply entry (endpoint -> nat:port), where port claims look.
 */
static __always_inline void masquerade_note_client(const struct pkt *p, const struct ct_value *out)
{
	__u8 bit = close_bit(p, CLOSE_FIN_CLIENT);
	if (!bit)
		return;
	struct ct_key back = { .saddr = p->daddr, .daddr = out->addr, .sport = p->dport, .dport = out->port,
			       .proto = p->proto };
	struct ct_value *e = bpf_map_lookup_elem(&kpt_ct, &back);
	if (e && (e->flags & CT_UNMASQ))
		e->closing |= bit;
}

/*
 * p: the connection's first packet, already DNATed (client -> endpoint).
 * 1 when masqueraded, 0 when there is no route to the endpoint (the packet
 * goes nowhere anyway), -1 when no port was free among the ones tried (the
 * packet is dropped; the client's retransmit tries other ports), and
 * MASQ_BY_MARK where the kernel cannot say the route's source (before 6.7,
 * no BPF_FIB_LOOKUP_SRC): then the mark and the proxy's nftables table
 * masquerade the connection, as before this file existed.
 * ctx is tc ingress's skb, or with xdp set (a constant where inlined) the
 * XDP program's xdp_md: XDP balances such connections too (xdp.h), and sets
 * up the same two entries. Only the answer 1 leaves entries behind (0 and
 * -1 may leave a mark in kpt_seen, which only lets more packets past the
 * first check).
 */
static __always_inline int masquerade_in(void *ctx, int xdp, const struct pkt *p, __u64 now)
{
	struct bpf_fib_lookup f;
	int rc = route_lookup_ctx(ctx, xdp, p, 1, &f);
	if (rc < 0)
		return MASQ_BY_MARK;
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return 0;
	union kpt_addr nat;
	if (p->v6)
		__builtin_memcpy(nat.w, f.ipv6_src, 16);
	else
		addr_from_v4(&nat, f.ipv4_src);
	if (!(nat.w[0] | nat.w[1] | nat.w[3]))
		return 0;
	/* Before the entries exist: the first check lets their packets through from the first one on. */
	seen_mark(SEEN_ORIG_DST, &p->daddr);
	struct ct_key k = { .saddr = p->daddr, .daddr = nat, .sport = p->dport, .proto = p->proto };
	struct ct_value v = { .addr = p->saddr, .port = p->sport, .flags = CT_UNMASQ, .created_ns = now };
	__u32 start = bpf_get_prandom_u32();
	__be16 port = 0, over = 0;
	/* Unrolled: the 6.1 verifier refuses this loop's back-edge (a kfunc call in its body). */
#pragma unroll
	for (int i = 0; i < NAT_PORT_TRIES; i++) {
		k.dport = bpf_htons(NAT_PORT_MIN + (start + i) % NAT_PORT_SPAN);
		/* The endpoint's reply as it will come back (k): if conntrack knows it, netfilter masqueraded
		 * another connection onto that port (a mode before a handover, an iptables rule): taken. */
		if (conntrack_knows(ctx, xdp, &k, p->v6))
			continue;
		if (bpf_map_update_elem(&kpt_ct, &k, &v, BPF_NOEXIST) == 0) {
			port = k.dport;
			break;
		}
		if (!over) {
			struct ct_value *e = bpf_map_lookup_elem(&kpt_ct, &k);
			if (e && masquerade_closed(e))
				over = k.dport;
		}
	}
	if (!port) {
		if (!over)
			return -1;
		/* No port was free: take over one whose connection is over. Its client's entry that
		 * rewrote the source (client -> endpoint) goes with it, so that client's next connection
		 * on the same port (forget_flow) does not take the new connection's reply entry along. */
		k.dport = over;
		struct ct_value *e = bpf_map_lookup_elem(&kpt_ct, &k);
		if (!e || !masquerade_closed(e))
			return -1; /* another CPU took it meanwhile */
		struct ct_key old = { .saddr = e->addr, .daddr = p->daddr, .sport = e->port, .dport = p->dport,
				      .proto = p->proto };
		bpf_map_update_elem(&kpt_ct, &k, &v, BPF_ANY);
		bpf_map_delete_elem(&kpt_ct, &old);
		port = over;
	}
	/* k and v again (the stack is short): client -> endpoint, at egress, source to nat:port. */
	k.saddr = p->saddr;
	k.daddr = p->daddr;
	k.sport = p->sport;
	k.dport = p->dport;
	v.addr = nat;
	v.port = port;
	v.flags = CT_REPLY | CT_AT_EGRESS;
	bpf_map_update_elem(&kpt_ct, &k, &v, BPF_ANY);
	return 1;
}

/* A connection masqueraded here is over: its two entries go too (out: client -> endpoint). */
static __always_inline void masquerade_forget(const struct ct_key *out)
{
	struct ct_value *e = bpf_map_lookup_elem(&kpt_ct, out);
	if (!e || (e->flags & (CT_REPLY | CT_AT_EGRESS)) != (CT_REPLY | CT_AT_EGRESS))
		return;
	struct ct_key back = { .saddr = out->daddr, .daddr = e->addr, .sport = out->dport, .dport = e->port,
			       .proto = out->proto };
	bpf_map_delete_elem(&kpt_ct, &back);
	bpf_map_delete_elem(&kpt_ct, out);
}

#endif
