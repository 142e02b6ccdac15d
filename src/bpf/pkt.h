/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Parsing a packet into the fields the load balancer needs, and rewriting
 * its addresses and ports with incremental checksum fixups.
 *
 * Scope: Ethernet framing (every device the proxy attaches to has it;
 * loopback too), IPv4 with or without options, IPv6 without extension
 * headers other than a fragment header, TCP and UDP. Fragments are parsed
 * too: a first fragment like any packet, a later one without ports (it has
 * none; frag.h finds them from its first fragment). ICMP and ICMPv6 are told
 * apart (PARSE_ICMP) for icmp.h. Anything else is reported as "not ours" and
 * passes untouched: other protocols, IPv6 with other extension headers.
 */
#ifndef KPT_PKT_H
#define KPT_PKT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "abi.h"

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10

struct pkt {
	union kpt_addr saddr;
	union kpt_addr daddr;
	__be16 sport;
	__be16 dport;
	__u32 l4off;
	__u8 v6;        /* 0 = IPv4, 1 = IPv6 */
	__u8 proto;     /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 tcp_flags;
	__u8 ihl;       /* IPv4 header length in bytes */
	__u8 frag;      /* enum pkt_frag */
	__be32 frag_id; /* the identification fragments of one datagram share (IPv4: 16 bits) */
};

/* The IPv6 fragment header (the kernel's struct frag_hdr is not in its UAPI). */
struct kpt_frag6hdr {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; /* offset in 8-byte units << 3, and the more-fragments bit (1) */
	__be32 identification;
};

enum pkt_frag {
	FRAG_NONE = 0,
	FRAG_FIRST = 1, /* offset 0, more to come: has the ports */
	FRAG_LATER = 2, /* an offset: no L4 header, ports 0 until frag.h fills them in */
};

static __always_inline void addr_from_v4(union kpt_addr *a, __be32 ip)
{
	a->w[0] = 0;
	a->w[1] = 0;
	a->w[2] = bpf_htonl(0xffff);
	a->w[3] = ip;
}

static __always_inline int addr_eq(const union kpt_addr *a, const union kpt_addr *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2] && a->w[3] == b->w[3];
}

#define PARSE_NOT_LINEAR (-2)
#define PARSE_ICMP (-3) /* ICMP or ICMPv6: addresses, l4off and ihl are set */

/* What parse() keeps of an IPv4 header; 1 when the packet has no L4 header to read (a later fragment). */
static __always_inline int ipv4_head(struct pkt *p, const struct iphdr *ip, __u32 l3)
{
	p->v6 = 0;
	p->proto = ip->protocol;
	p->ihl = ip->ihl * 4;
	p->l4off = l3 + p->ihl;
	p->frag_id = ip->id;
	p->frag = (ip->frag_off & bpf_htons(0x1fff)) ? FRAG_LATER
		  : (ip->frag_off & bpf_htons(0x2000)) ? FRAG_FIRST
							 : FRAG_NONE;
	addr_from_v4(&p->saddr, ip->saddr);
	addr_from_v4(&p->daddr, ip->daddr);
	if (p->frag == FRAG_LATER) {
		p->sport = p->dport = 0;
		p->tcp_flags = 0;
		return 1;
	}
	return 0;
}

/* The same for IPv6, whose payload is `nh`, after the fragment header fh if there is one. */
static __always_inline int ipv6_head(struct pkt *p, const struct ipv6hdr *ip6, __u8 nh,
				     const struct kpt_frag6hdr *fh, __u32 l3)
{
	p->v6 = 1;
	p->proto = nh;
	p->ihl = 0;
	p->l4off = l3 + sizeof(struct ipv6hdr);
	p->frag = FRAG_NONE;
	p->frag_id = 0;
	__builtin_memcpy(p->saddr.b, &ip6->saddr, 16);
	__builtin_memcpy(p->daddr.b, &ip6->daddr, 16);
	if (fh) {
		p->l4off += sizeof(*fh);
		p->frag_id = fh->identification;
		p->frag = (fh->frag_off & bpf_htons(0xfff8)) ? FRAG_LATER
			  : (fh->frag_off & bpf_htons(1)) ? FRAG_FIRST
							   : FRAG_NONE; /* an atomic fragment: the whole datagram */
	}
	if (p->frag == FRAG_LATER) {
		p->sport = p->dport = 0;
		p->tcp_flags = 0;
		return 1;
	}
	return 0;
}

/*
 * parse() reading the headers in place (direct packet access): a few loads
 * instead of three bpf_skb_load_bytes calls, which cost more than all else a
 * packet that is not ours meets. PARSE_NOT_LINEAR when the headers are not
 * all in the skb's linear part; parse_copy() then copies them out.
 */
static __always_inline int parse_direct(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__u8 *l4;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + ETH_HLEN;
		if ((void *)(ip + 1) > end)
			return PARSE_NOT_LINEAR;
		if (ip->version != 4 || ip->ihl < 5)
			return -1;
		if (ip->protocol == IPPROTO_ICMP) {
			if (ip->frag_off & bpf_htons(0x3fff))
				return -1;
			ipv4_head(p, ip, ETH_HLEN);
			return PARSE_ICMP;
		}
		if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
			return -1;
		if (ipv4_head(p, ip, ETH_HLEN))
			return 0;
		l4 = (__u8 *)ip + p->ihl;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + ETH_HLEN;
		struct kpt_frag6hdr *fh = 0;
		if ((void *)(ip6 + 1) > end)
			return PARSE_NOT_LINEAR;
		__u8 nh = ip6->nexthdr;
		l4 = (__u8 *)(ip6 + 1);
		if (nh == IPPROTO_FRAGMENT) {
			fh = (void *)(ip6 + 1);
			if ((void *)(fh + 1) > end)
				return PARSE_NOT_LINEAR;
			nh = fh->nexthdr;
			l4 += sizeof(*fh);
		}
		if (nh != IPPROTO_TCP && nh != IPPROTO_UDP && (nh != IPPROTO_ICMPV6 || fh))
			return -1;
		if (ipv6_head(p, ip6, nh, fh, ETH_HLEN))
			return 0;
		if (nh == IPPROTO_ICMPV6)
			return PARSE_ICMP;
	} else {
		return -1;
	}
	if ((void *)(l4 + 4) > end)
		return PARSE_NOT_LINEAR;
	__builtin_memcpy(&p->sport, l4, 2);
	__builtin_memcpy(&p->dport, l4 + 2, 2);
	p->tcp_flags = 0;
	if (p->proto == IPPROTO_TCP) {
		if ((void *)(l4 + 14) > end)
			return PARSE_NOT_LINEAR;
		p->tcp_flags = l4[13]; /* the flags byte */
	}
	return 0;
}

/* parse() for headers outside the linear part: copied out with bpf_skb_load_bytes. */
static __always_inline int parse_copy(struct __sk_buff *skb, struct pkt *p)
{
	__u32 l3 = ETH_HLEN;
	__u8 ports[4];

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, l3, &ip, sizeof(ip)) < 0)
			return -1;
		if (ip.version != 4 || ip.ihl < 5)
			return -1;
		if (ip.protocol == IPPROTO_ICMP) {
			if (ip.frag_off & bpf_htons(0x3fff))
				return -1;
			ipv4_head(p, &ip, l3);
			return PARSE_ICMP;
		}
		if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP)
			return -1;
		if (ipv4_head(p, &ip, l3))
			return 0;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		struct kpt_frag6hdr fh;
		if (bpf_skb_load_bytes(skb, l3, &ip6, sizeof(ip6)) < 0)
			return -1;
		__u8 nh = ip6.nexthdr;
		int frag = nh == IPPROTO_FRAGMENT;
		if (frag) {
			if (bpf_skb_load_bytes(skb, l3 + sizeof(ip6), &fh, sizeof(fh)) < 0)
				return -1;
			nh = fh.nexthdr;
		}
		if (nh != IPPROTO_TCP && nh != IPPROTO_UDP && (nh != IPPROTO_ICMPV6 || frag))
			return -1;
		if (ipv6_head(p, &ip6, nh, frag ? &fh : 0, l3))
			return 0;
		if (nh == IPPROTO_ICMPV6)
			return PARSE_ICMP;
	} else {
		return -1;
	}
	if (bpf_skb_load_bytes(skb, p->l4off, ports, 4) < 0)
		return -1;
	__builtin_memcpy(&p->sport, &ports[0], 2);
	__builtin_memcpy(&p->dport, &ports[2], 2);
	p->tcp_flags = 0;
	if (p->proto == IPPROTO_TCP && bpf_skb_load_bytes(skb, p->l4off + 13, &p->tcp_flags, 1) < 0)
		return -1;
	return 0;
}

/* 0 when the packet is one we handle, PARSE_ICMP for ICMP(v6), -1 otherwise. */
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	int r = parse_direct(skb, p);
	return r == PARSE_NOT_LINEAR ? parse_copy(skb, p) : r;
}

static __always_inline __u32 l4_csum_off(const struct pkt *p)
{
	return p->l4off + (p->proto == IPPROTO_TCP ? offsetof(struct tcphdr, check) : offsetof(struct udphdr, check));
}

/*
 * Rewrite the destination (dst = 1) or source address and port to to/port.
 * The L4 checksum covers the pseudo header, so an address change updates it
 * with BPF_F_PSEUDO_HDR; that also keeps CHECKSUM_PARTIAL packets (veth,
 * local sockets) right, whose checksum field holds only the pseudo-header
 * sum. An IPv4 UDP checksum of 0 means "none" and stays 0.
 */
static __always_inline int rewrite(struct __sk_buff *skb, struct pkt *p, int dst, const union kpt_addr *to, __be16 port)
{
	__u32 csum_off = l4_csum_off(p);
	__u64 mangled0 = p->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	union kpt_addr *from = dst ? &p->daddr : &p->saddr;
	__be16 *from_port = dst ? &p->dport : &p->sport;
	__u32 port_off = p->l4off + (dst ? 2 : 0);

	if (p->frag == FRAG_LATER) {
		/* No L4 header here: the first fragment's checksum fixup covered the whole datagram, and the port
		 * was rewritten there. */
		if (!p->v6) {
			__be32 o = from->w[3], n = to->w[3];
			__u32 ip_off = ETH_HLEN + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));
			if (o != n && (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), o, n, 4) < 0 ||
				       bpf_skb_store_bytes(skb, ip_off, &n, 4, 0) < 0))
				return -1;
		} else {
			__u32 ip_off = ETH_HLEN + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
			if (bpf_skb_store_bytes(skb, ip_off, to->b, 16, 0) < 0)
				return -1;
		}
		*from = *to;
		*from_port = port;
		return 0;
	}
	if (!p->v6) {
		__be32 o = from->w[3], n = to->w[3];
		__u32 ip_off = ETH_HLEN + (dst ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));
		if (o != n) {
			if (bpf_l4_csum_replace(skb, csum_off, o, n, BPF_F_PSEUDO_HDR | mangled0 | 4) < 0)
				return -1;
			if (bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), o, n, 4) < 0)
				return -1;
			if (bpf_skb_store_bytes(skb, ip_off, &n, 4, 0) < 0)
				return -1;
		}
	} else if (!addr_eq(from, to)) {
		__u32 ip_off = ETH_HLEN + (dst ? offsetof(struct ipv6hdr, daddr) : offsetof(struct ipv6hdr, saddr));
		__s64 diff = bpf_csum_diff(from->w, 16, (__be32 *)to->w, 16, 0);
		if (bpf_l4_csum_replace(skb, csum_off, 0, diff, BPF_F_PSEUDO_HDR | mangled0) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, ip_off, to->b, 16, 0) < 0)
			return -1;
	}
	if (*from_port != port) {
		if (bpf_l4_csum_replace(skb, csum_off, *from_port, port, mangled0 | 2) < 0)
			return -1;
		if (bpf_skb_store_bytes(skb, port_off, &port, 2, 0) < 0)
			return -1;
	}
	*from = *to;
	*from_port = port;
	return 0;
}

#endif
