/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Answers the datapath sends itself, and where a packet goes after the
 * egress hook changed its destination.
 *
 * REJECT: upstream rejects with ICMP port unreachable (iptables' REJECT
 * and nftables' reject both default to it, for TCP too), so this turns the
 * packet into that ICMP error in place and sends it back the way it came:
 * out of the interface it arrived on (ingress), or up the stack of the node
 * that sent it (egress).
 */
#ifndef KPT_REPLY_H
#define KPT_REPLY_H

#include <linux/pkt_cls.h>
#include "pkt.h"

/* linux/icmp.h drags in libc headers; the two ICMP headers are simple. */
struct kpt_icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be32 unused;
};
#define ICMP_DEST_UNREACH 3
#define ICMP_PORT_UNREACH 3
#define ICMPV6_DEST_UNREACH 1
#define ICMPV6_PORT_UNREACH 4

#define AF_INET 2
#define AF_INET6 10
#define LOOPBACK_IFINDEX 1

static __always_inline __u16 csum_fold32(__s64 sum)
{
	__u32 s = (__u32)sum;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return ~s;
}

static __always_inline int send_back(struct __sk_buff *skb, int ingress)
{
	return bpf_redirect(skb->ifindex, ingress ? 0 : BPF_F_INGRESS);
}

/* Swap the MAC addresses: the answer goes to whoever sent the packet (at
 * egress, "whoever" is this interface, whose address is the source MAC). */
static __always_inline int swap_macs(struct __sk_buff *skb, struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];
	if (bpf_skb_load_bytes(skb, 0, eth, sizeof(*eth)) < 0)
		return -1;
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return 0;
}

struct icmp4_body {
	struct kpt_icmphdr h;
	__u8 orig[28]; /* the original IP header (no options) and 8 bytes of its payload */
};

static __always_inline int reject4(struct __sk_buff *skb, struct pkt *p, int ingress)
{
	struct ethhdr eth;
	struct iphdr ip = {};
	struct icmp4_body b = {};

	if (p->ihl != sizeof(struct iphdr) || skb->gso_segs > 1)
		return TC_ACT_SHOT; /* too unusual to answer: drop instead */
	if (swap_macs(skb, &eth) < 0 || bpf_skb_load_bytes(skb, ETH_HLEN, b.orig, sizeof(b.orig)) < 0)
		return TC_ACT_SHOT;
	ip.version = 4;
	ip.ihl = 5;
	ip.tos = 0xc0;
	ip.tot_len = bpf_htons(sizeof(ip) + sizeof(b));
	ip.ttl = 64;
	ip.protocol = IPPROTO_ICMP;
	ip.saddr = p->daddr.w[3];
	ip.daddr = p->saddr.w[3];
	ip.check = csum_fold32(bpf_csum_diff(0, 0, (__be32 *)&ip, sizeof(ip), 0));
	b.h.type = ICMP_DEST_UNREACH;
	b.h.code = ICMP_PORT_UNREACH;
	b.h.checksum = csum_fold32(bpf_csum_diff(0, 0, (__be32 *)&b, sizeof(b), 0));
	if (bpf_skb_change_tail(skb, ETH_HLEN + sizeof(ip) + sizeof(b), 0) < 0)
		return TC_ACT_SHOT;
	if (bpf_skb_store_bytes(skb, 0, &eth, sizeof(eth), 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN, &ip, sizeof(ip), 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + sizeof(ip), &b, sizeof(b), 0) < 0)
		return TC_ACT_SHOT;
	return send_back(skb, ingress);
}

struct icmp6_body {
	struct kpt_icmphdr h;
	__u8 orig[48]; /* the original IPv6 header and 8 bytes of its payload */
};

struct icmp6_pseudo {
	union kpt_addr saddr;
	union kpt_addr daddr;
	__be32 len;
	__be32 nexthdr;
};

static __always_inline int reject6(struct __sk_buff *skb, struct pkt *p, int ingress)
{
	struct ethhdr eth;
	struct ipv6hdr ip6 = {};
	struct icmp6_body b = {};
	struct icmp6_pseudo ph = {};

	if (skb->gso_segs > 1)
		return TC_ACT_SHOT;
	if (swap_macs(skb, &eth) < 0 || bpf_skb_load_bytes(skb, ETH_HLEN, b.orig, sizeof(b.orig)) < 0)
		return TC_ACT_SHOT;
	ip6.version = 6;
	ip6.payload_len = bpf_htons(sizeof(b));
	ip6.nexthdr = IPPROTO_ICMPV6;
	ip6.hop_limit = 64;
	__builtin_memcpy(&ip6.saddr, p->daddr.b, 16);
	__builtin_memcpy(&ip6.daddr, p->saddr.b, 16);
	b.h.type = ICMPV6_DEST_UNREACH;
	b.h.code = ICMPV6_PORT_UNREACH;
	ph.saddr = p->daddr;
	ph.daddr = p->saddr;
	ph.len = bpf_htonl(sizeof(b));
	ph.nexthdr = bpf_htonl(IPPROTO_ICMPV6);
	__s64 sum = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
	b.h.checksum = csum_fold32(bpf_csum_diff(0, 0, (__be32 *)&b, sizeof(b), sum));
	if (bpf_skb_change_tail(skb, ETH_HLEN + sizeof(ip6) + sizeof(b), 0) < 0)
		return TC_ACT_SHOT;
	if (bpf_skb_store_bytes(skb, 0, &eth, sizeof(eth), 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6), 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + sizeof(ip6), &b, sizeof(b), 0) < 0)
		return TC_ACT_SHOT;
	return send_back(skb, ingress);
}

static __always_inline int reject(struct __sk_buff *skb, struct pkt *p, int ingress)
{
	return p->v6 ? reject6(skb, p, ingress) : reject4(skb, p, ingress);
}

/* Deliver the packet up the stack through loopback (whose MAC is all zeros). */
static __always_inline int to_loopback(struct __sk_buff *skb)
{
	__u8 zero[2 * ETH_ALEN] = {};
	if (bpf_skb_store_bytes(skb, 0, zero, sizeof(zero), 0) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(LOOPBACK_IFINDEX, BPF_F_INGRESS);
}

/*
 * At egress the route was chosen for the service address; after DNAT the
 * packet needs the route of its endpoint. route_lookup asks the FIB (with
 * want_src, also for the source address that route would use, which is what
 * masquerade picks); route_send sends the packet there, resolving the
 * neighbour if needed. A local endpoint (the node's own address) is looped
 * back up the stack.
 * route_lookup_ctx is route_lookup for either context: ctx is the tc program's
 * skb, or with xdp set the XDP program's xdp_md (xdp is a constant where it
 * is inlined). Both ask as if forwarding from the interface the packet is
 * on (tc) or came in through (XDP), and the helper takes either context.
 */
static __always_inline int route_lookup_ctx(void *ctx, int xdp, const struct pkt *p, int want_src,
					    struct bpf_fib_lookup *f)
{
	__builtin_memset(f, 0, sizeof(*f));
	f->ifindex = xdp ? ((struct xdp_md *)ctx)->ingress_ifindex : ((struct __sk_buff *)ctx)->ifindex;
	f->l4_protocol = p->proto;
	f->sport = p->sport;
	f->dport = p->dport;
	if (!p->v6) {
		f->family = AF_INET;
		f->ipv4_src = p->saddr.w[3];
		f->ipv4_dst = p->daddr.w[3];
	} else {
		f->family = AF_INET6;
		__builtin_memcpy(f->ipv6_src, p->saddr.w, 16);
		__builtin_memcpy(f->ipv6_dst, p->daddr.w, 16);
	}
	return bpf_fib_lookup(ctx, f, sizeof(*f), want_src ? BPF_FIB_LOOKUP_SRC : 0);
}

static __always_inline int route_lookup(struct __sk_buff *skb, const struct pkt *p, int want_src,
					struct bpf_fib_lookup *f)
{
	return route_lookup_ctx(skb, 0, p, want_src, f);
}

#define KPT_EINVAL 22

/*
 * Whether bpf_fib_lookup knows BPF_FIB_LOOKUP_SRC (Linux 6.7; Debian 12's
 * 6.1 has it backported), without a lookup: asked for no address family,
 * the helper refuses flags it does not know (-EINVAL) before it looks at
 * the family (-EAFNOSUPPORT).
 */
static __always_inline int fib_has_src(void *ctx)
{
	struct bpf_fib_lookup f = {};
	return bpf_fib_lookup(ctx, &f, sizeof(f), BPF_FIB_LOOKUP_SRC) != -KPT_EINVAL;
}

static __always_inline int route_send(struct __sk_buff *skb, struct bpf_fib_lookup *f, int rc)
{
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		if (bpf_skb_store_bytes(skb, 0, f->dmac, ETH_ALEN, 0) < 0 ||
		    bpf_skb_store_bytes(skb, ETH_ALEN, f->smac, ETH_ALEN, 0) < 0)
			return TC_ACT_SHOT;
		if (f->ifindex == skb->ifindex)
			return TC_ACT_UNSPEC;
		return bpf_redirect(f->ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		struct bpf_redir_neigh nh = {};
		nh.nh_family = f->family;
		if (f->family == AF_INET)
			nh.ipv4_nh = f->ipv4_dst;
		else
			__builtin_memcpy(nh.ipv6_nh, f->ipv6_dst, 16);
		return bpf_redirect_neigh(f->ifindex, &nh, sizeof(nh), 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NOT_FWDED) {
		if (skb->ifindex == LOOPBACK_IFINDEX)
			return TC_ACT_UNSPEC; /* loopback egress comes back in by itself */
		return to_loopback(skb);
	}
	return TC_ACT_SHOT;
}

#endif
