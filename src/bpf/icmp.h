/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ICMP errors about translated connections. A router that cannot forward a
 * packet of a balanced connection (too big for the next link, TTL out) quotes
 * its headers in an error to the packet's source; so does an endpoint with no
 * socket on a port. The quote shows the packet as it was on the wire, that
 * is after our translation, which the receiving stack does not know: without
 * translating the error back it matches no socket, and path MTU discovery
 * through a Service fails (a bulk upload stalls once a link narrows).
 *
 * The quoted packet, turned around, is the key of one of the connection's two
 * entries (kpt_ct), and the error travels the way that entry's packets do:
 *  - the reply entry: the quote is client -> endpoint, the error goes to the
 *    client. The quoted destination becomes the service address and port, and
 *    so does the error's source when the endpoint sent it itself;
 *  - the original entry: the quote is service -> client (a reply as the
 *    client got it), the error goes to the service address. It goes on to the
 *    endpoint, and the quoted source becomes the endpoint's.
 * With CT_SNAT (the node's own connections, masqueraded here) the client's
 * own address comes back too. The error is translated at the hook where the
 * entry's own packets are, so netfilter sees it consistent with the
 * connection's other packets, and relates it to the connection.
 *
 * Checksums: the quoted IPv4 header's own, and the ICMP checksum over the
 * whole message (ICMPv6's also over the outer addresses). The quoted TCP or
 * UDP checksum is left: it covers a datagram the quote does not hold, and no
 * receiver checks it.
 */
#ifndef KPT_ICMP_H
#define KPT_ICMP_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"
#include "reply.h"

#define ICMP_TIME_EXCEEDED 11
#define ICMP_PARAMETERPROB 12

struct quote {
	union kpt_addr saddr;
	union kpt_addr daddr;
	__be16 sport;
	__be16 dport;
	__u32 off;   /* the quoted IP header */
	__u32 l4off; /* the quoted TCP or UDP header */
	__u8 proto;
};

static __always_inline int icmp_is_error(__u8 type, int v6)
{
	if (v6)
		return type >= ICMPV6_DEST_UNREACH && type <= 4; /* unreachable, too big, time, parameter */
	return type == ICMP_DEST_UNREACH || type == ICMP_TIME_EXCEEDED || type == ICMP_PARAMETERPROB;
}

/* The packet an ICMP error quotes; -1 when it is not an error or quotes nothing we translate. */
static __always_inline int quote_of(struct __sk_buff *skb, const struct pkt *p, struct quote *q)
{
	__u8 type;
	if (bpf_skb_load_bytes(skb, p->l4off, &type, 1) < 0 || !icmp_is_error(type, p->v6))
		return -1;
	q->off = p->l4off + 8;
	if (!p->v6) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, q->off, &ip, sizeof(ip)) < 0)
			return -1;
		if (ip.version != 4 || ip.ihl < 5 || (ip.frag_off & bpf_htons(0x1fff)))
			return -1;
		q->proto = ip.protocol;
		q->l4off = q->off + ip.ihl * 4;
		addr_from_v4(&q->saddr, ip.saddr);
		addr_from_v4(&q->daddr, ip.daddr);
	} else {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, q->off, &ip6, sizeof(ip6)) < 0)
			return -1;
		q->proto = ip6.nexthdr;
		q->l4off = q->off + sizeof(struct ipv6hdr);
		__builtin_memcpy(q->saddr.b, &ip6.saddr, 16);
		__builtin_memcpy(q->daddr.b, &ip6.daddr, 16);
	}
	if (q->proto != IPPROTO_TCP && q->proto != IPPROTO_UDP)
		return -1;
	__u8 ports[4];
	if (bpf_skb_load_bytes(skb, q->l4off, ports, 4) < 0)
		return -1;
	__builtin_memcpy(&q->sport, &ports[0], 2);
	__builtin_memcpy(&q->dport, &ports[2], 2);
	return 0;
}

/* The error's own source (dst = 0) or destination. ICMPv4 has no pseudo header; ICMPv6 has. */
static __always_inline int icmp_outer(struct __sk_buff *skb, struct pkt *p, int dst, const union kpt_addr *to)
{
	union kpt_addr *from = dst ? &p->daddr : &p->saddr;
	if (addr_eq(from, to))
		return 0;
	if (!p->v6) {
		__be32 o = from->w[3], n = to->w[3];
		__u32 off = ETH_HLEN + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));
		if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), o, n, 4) < 0 ||
		    bpf_skb_store_bytes(skb, off, &n, 4, 0) < 0)
			return -1;
	} else {
		__u32 off = ETH_HLEN + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
		__s64 diff = bpf_csum_diff(from->w, 16, (__be32 *)to->w, 16, 0);
		if (bpf_l4_csum_replace(skb, p->l4off + 2, 0, diff, BPF_F_PSEUDO_HDR) < 0 ||
		    bpf_skb_store_bytes(skb, off, to->b, 16, 0) < 0)
			return -1;
	}
	*from = *to;
	return 0;
}

/* The quoted packet's source (dst = 0) or destination address and port. */
static __always_inline int icmp_quoted(struct __sk_buff *skb, const struct pkt *p, struct quote *q, int dst,
				       const union kpt_addr *to, __be16 port)
{
	__u32 csum = p->l4off + 2;
	union kpt_addr *from = dst ? &q->daddr : &q->saddr;
	__be16 *from_port = dst ? &q->dport : &q->sport;
	if (!addr_eq(from, to)) {
		if (!p->v6) {
			__be32 o = from->w[3], n = to->w[3];
			__u32 ipsum = q->off + offsetof(struct iphdr, check);
			__u16 s0, s1;
			if (bpf_skb_load_bytes(skb, ipsum, &s0, 2) < 0 ||
			    bpf_l3_csum_replace(skb, ipsum, o, n, 4) < 0 ||
			    bpf_skb_load_bytes(skb, ipsum, &s1, 2) < 0 ||
			    bpf_skb_store_bytes(skb, q->off + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr)),
						&n, 4, 0) < 0 ||
			    bpf_l4_csum_replace(skb, csum, o, n, 4) < 0 || bpf_l4_csum_replace(skb, csum, s0, s1, 2) < 0)
				return -1;
		} else {
			__s64 diff = bpf_csum_diff(from->w, 16, (__be32 *)to->w, 16, 0);
			if (bpf_l4_csum_replace(skb, csum, 0, diff, 0) < 0 ||
			    bpf_skb_store_bytes(skb,
						q->off + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr)),
						to->b, 16, 0) < 0)
				return -1;
		}
		*from = *to;
	}
	if (*from_port != port) {
		if (bpf_l4_csum_replace(skb, csum, *from_port, port, 2) < 0 ||
		    bpf_skb_store_bytes(skb, q->l4off + (dst ? 2 : 0), &port, 2, 0) < 0)
			return -1;
		*from_port = port;
	}
	return 0;
}

static __always_inline int icmp_error(struct __sk_buff *skb, struct pkt *p, int ingress)
{
	struct quote q;
	p->sport = p->dport = 0;
	p->tcp_flags = 0;
	if (quote_of(skb, p, &q) < 0)
		return TC_ACT_UNSPEC;
	struct ct_key k = { .saddr = q.daddr, .daddr = q.saddr, .sport = q.dport, .dport = q.sport, .proto = q.proto };
	struct ct_value *ct = bpf_map_lookup_elem(&kpt_ct, &k);
	if (!ct)
		return TC_ACT_UNSPEC;
	int at_egress = !!(ct->flags & CT_AT_EGRESS);
	if (at_egress == !!ingress)
		return TC_ACT_UNSPEC; /* the other hook translates this connection's packets */
	union kpt_addr a = ct->addr, nat = ct->nat;
	__be16 port = ct->port;
	int snat = ct->flags & CT_SNAT;
	if (ct->flags & CT_REPLY) {
		if (addr_eq(&p->saddr, &q.daddr) && icmp_outer(skb, p, 0, &a) < 0)
			return TC_ACT_SHOT;
		if (icmp_quoted(skb, p, &q, 1, &a, port) < 0)
			return TC_ACT_SHOT;
		if (snat && (icmp_outer(skb, p, 1, &nat) < 0 || icmp_quoted(skb, p, &q, 0, &nat, q.sport) < 0))
			return TC_ACT_SHOT;
		stat_inc(STAT_ICMP);
		return TC_ACT_UNSPEC;
	}
	int from_client = addr_eq(&p->saddr, &q.daddr);
	if (icmp_outer(skb, p, 1, &a) < 0 || icmp_quoted(skb, p, &q, 0, &a, port) < 0)
		return TC_ACT_SHOT;
	if (snat && (icmp_quoted(skb, p, &q, 1, &nat, q.dport) < 0 || (from_client && icmp_outer(skb, p, 0, &nat) < 0)))
		return TC_ACT_SHOT;
	stat_inc(STAT_ICMP);
	if (!at_egress)
		return TC_ACT_UNSPEC;
	/* At egress the route was chosen for the service address: the endpoint's instead. */
	struct bpf_fib_lookup f;
	return route_send(skb, &f, route_lookup(skb, p, 0, &f));
}

#endif
