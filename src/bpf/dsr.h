/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Direct server return for external traffic (--ebpf-lb-mode=dsr, CFG_DSR).
 *
 * A NodePort, externalIP or load-balancer connection with
 * externalTrafficPolicy Cluster from a client outside the node is, in the
 * default snat mode, masqueraded, so that the endpoint's replies come back
 * through the node the client chose. With DSR it is DNATed only, and when
 * the endpoint is on another node, the connection's first packet carries
 * the address and port the client connected to in an option of our own
 * (an IPv4 option, an IPv6 destination option). The endpoint's node reads
 * it and writes a reply entry: the endpoint's replies leave that node with
 * the Service's address and port as their source, straight to the client.
 *
 * The option, IPv4: type 0x9e (copied into fragments, class 0, number 30:
 * the value RFC 4727 sets aside for experiments), length 8, then the port
 * and the address, both in network order. It is the first option, right
 * after the 20-byte header: the entering node inserts it there, and only
 * into packets that had no options.
 * IPv6: a destination-options header (next header 60) right after the
 * fixed header, 24 bytes: the next header, length 2 (24 bytes), option type
 * 0x1e (RFC 4727's experimental value with action 00: a node that does not
 * know it skips it), option length 18, the port, the 16-byte address, then
 * an empty PadN (1, 0). Only into packets without extension headers.
 *
 * Which packets carry it: a TCP SYN (the first one and any retransmit: the
 * connection entry of the entering node has CT_DSR until the client's first
 * ACK) and the first UDP datagram of a flow. If that datagram is lost on the
 * way, the endpoint's node has no entry and the flow's replies go out
 * untranslated (the client drops them) until the client opens a new flow.
 *
 * The endpoint's node does not strip the option: Linux ignores IPv4 options
 * it does not know on packets it receives or forwards, and TCP echoes only
 * the ones it knows (record route, timestamps, source routes), so the pod's
 * stack never answers with it; an IPv6 destination option of type 00xxxxxx
 * is skipped by a node that does not know it. Stripping would cost a second
 * resize of every first packet.
 *
 * The option is trusted only as far as the maps allow: it must name a
 * Service port the node knows (the NodePort entry, or the address's own)
 * whose local set holds the packet's destination, so a forged option can
 * at most make one of this node's endpoints answer as that Service, which
 * it is.
 */
#ifndef KPT_DSR_H
#define KPT_DSR_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"
#include "lb.h"
#include "filter.h"

#define DSR_OPT_TYPE 0x9e
#define DSR_OPT_LEN 8

struct dsr_opt4 {
	__u8 type;
	__u8 len;
	__be16 port;
	__be32 addr;
};

/* IPv6: a destination-options header right after the fixed header, holding one option and a PadN. */
#define DSR_OPT6_TYPE 0x1e /* RFC 4727 experimental; action 00: a node that does not know it skips it */
#define DSR_OPT6_LEN 18
#define IPPROTO_DSTOPTS_HDR 60
struct dsr_opt6 {
	__u8 nexthdr;
	__u8 hdrlen; /* in 8-byte units, not counting the first 8: 2 */
	__u8 type;
	__u8 len;
	__be16 port;
	__u8 addr[16];
	__u8 pad[2]; /* PadN, empty: type 1, length 0 */
};

enum dsr_kind {
	DSR_NONE = 0,   /* masquerade as in snat mode */
	DSR_LOCAL = 1,  /* the endpoint is on this node: DNAT only, its replies pass here */
	DSR_REMOTE = 2, /* another node's endpoint: DNAT only, and the option on the first packet */
};

/* An endpoint of the port's local set: on this node. */
static __always_inline int dsr_local_endpoint(__u32 local_set, const struct ep_value *ep)
{
	struct member_key mk = { .set_id = local_set, .port = ep->port, .addr = ep->addr };
	return local_set && bpf_map_lookup_elem(&kpt_members, &mk) != 0;
}

/*
 * Entering node, a connection balance() masquerades: whether DSR takes it
 * instead. Only external ports with eTP Cluster, from a client that
 * is neither a pod nor an address of this node (those keep their masquerade:
 * the replies must come back through here). A remote endpoint needs a packet
 * that can open the connection, for the option.
 */
static __always_inline int dsr_kind(struct __sk_buff *skb, const struct cfg_value *cfg, const struct svc_value *svc,
				    const struct pkt *p, const struct lb_result *res)
{
	if (!(cfg->flags & CFG_DSR) || svc->kind == KIND_CLUSTER_IP || (svc->flags & SVC_LOCAL_POLICY))
		return DSR_NONE;
	if (addr_eq(&p->saddr, &res->ep.addr) || src_is_local(p) ||
	    ((cfg->flags & (CFG_DETECT_CIDR | CFG_DETECT_IFACE)) && src_is_pod(skb->ingress_ifindex, cfg, p)))
		return DSR_NONE;
	if (dsr_local_endpoint(svc->local_set, &res->ep))
		return DSR_LOCAL;
	if (p->proto == IPPROTO_TCP ? !pure_syn(p) : p->proto != IPPROTO_UDP)
		return DSR_NONE;
	return DSR_REMOTE;
}

/*
 * Insert the option with p's destination (the packet is not DNATed yet).
 * 0: done, p's offsets follow; -1: nothing changed (the packet has options
 * already, is a GSO aggregate, or the resize failed); -2: the packet is
 * half rewritten and must be dropped.
 * The header checksum is updated for the changed first word (length of
 * header and datagram) and the option's two words; the L4 checksum covers
 * neither.
 */
static __always_inline int dsr_add_opt4(struct __sk_buff *skb, struct pkt *p)
{
	if (p->ihl != sizeof(struct iphdr) || skb->gso_segs > 1)
		return -1;
	__be32 w0;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &w0, 4) < 0)
		return -1;
	struct iphdr *h = (struct iphdr *)&w0; /* its first word only: version, ihl, tos, tot_len */
	__u16 tot = bpf_ntohs(h->tot_len);
	if (tot > 0xffff - DSR_OPT_LEN)
		return -1;
	if (bpf_skb_adjust_room(skb, DSR_OPT_LEN, BPF_ADJ_ROOM_NET, 0) < 0)
		return -1;
	__be32 old = w0;
	h->ihl += DSR_OPT_LEN / 4;
	h->tot_len = bpf_htons(tot + DSR_OPT_LEN);
	struct dsr_opt4 o = { .type = DSR_OPT_TYPE, .len = DSR_OPT_LEN, .port = p->dport, .addr = p->daddr.w[3] };
	__u32 check = ETH_HLEN + offsetof(struct iphdr, check);
	__be32 o1, o2;
	__builtin_memcpy(&o1, &o, 4);
	__builtin_memcpy(&o2, (__u8 *)&o + 4, 4);
	if (bpf_l3_csum_replace(skb, check, old, w0, 4) < 0 || bpf_l3_csum_replace(skb, check, 0, o1, 4) < 0 ||
	    bpf_l3_csum_replace(skb, check, 0, o2, 4) < 0 || bpf_skb_store_bytes(skb, ETH_HLEN, &w0, 4, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + sizeof(struct iphdr), &o, sizeof(o), 0) < 0)
		return -2;
	p->ihl += DSR_OPT_LEN;
	p->l4off += DSR_OPT_LEN;
	stat_inc(STAT_DSR_OPT);
	return 0;
}

/* The same for IPv6: a destination-options header inserted after the fixed header (only into packets that
 * had no extension header); no header checksum to fix, and the L4 one does not cover it. */
static __always_inline int dsr_add_opt6(struct __sk_buff *skb, struct pkt *p)
{
	if (p->l4off != ETH_HLEN + sizeof(struct ipv6hdr) || skb->gso_segs > 1)
		return -1;
	__be16 plen;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, payload_len), &plen, 2) < 0)
		return -1;
	if (bpf_ntohs(plen) > 0xffff - sizeof(struct dsr_opt6))
		return -1;
	if (bpf_skb_adjust_room(skb, sizeof(struct dsr_opt6), BPF_ADJ_ROOM_NET, 0) < 0)
		return -1;
	struct dsr_opt6 o = { .nexthdr = p->proto, .hdrlen = 2, .type = DSR_OPT6_TYPE, .len = DSR_OPT6_LEN,
			      .port = p->dport, .pad = { 1, 0 } };
	__builtin_memcpy(o.addr, p->daddr.b, 16);
	plen = bpf_htons(bpf_ntohs(plen) + sizeof(struct dsr_opt6));
	__u8 nh = IPPROTO_DSTOPTS_HDR;
	if (bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, payload_len), &plen, 2, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, nexthdr), &nh, 1, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + sizeof(struct ipv6hdr), &o, sizeof(o), 0) < 0)
		return -2;
	p->l4off += sizeof(struct dsr_opt6);
	stat_inc(STAT_DSR_OPT);
	return 0;
}

static __always_inline int dsr_add_opt(struct __sk_buff *skb, struct pkt *p)
{
	return p->v6 ? dsr_add_opt6(skb, p) : dsr_add_opt4(skb, p);
}

/* The endpoint's side, once the option is read: p is the packet (client -> endpoint), vip:vport the option's. */
static __always_inline void dsr_remember(const struct pkt *p, const union kpt_addr *vip, __be16 vport)
{
	/* Another node's address is not in kpt_addrs: then only its NodePort entry can name the port. */
	__u32 *af = bpf_map_lookup_elem(&kpt_addrs, vip);
	struct svc_value *svc = lookup_service(vip, vport, p->proto, p->v6, (af ? *af : 0) | ADDR_NODEPORT);
	if (!svc || svc->kind == KIND_CLUSTER_IP)
		return;
	struct ep_value ep = { .addr = p->daddr, .port = p->dport };
	if (!dsr_local_endpoint(svc->local_set, &ep))
		return;
	struct ct_key rk = { .saddr = p->daddr, .daddr = p->saddr, .sport = p->dport, .dport = p->sport,
			     .proto = p->proto };
	struct ct_value rev = { .addr = *vip, .port = vport, .svc_id = svc->svc_id, .flags = CT_REPLY | CT_AT_EGRESS,
				.created_ns = bpf_ktime_get_ns() };
	/* Before the entry exists: the first check lets the replies through from the first one on. */
	seen_mark(SEEN_REPLY_SRC, &p->daddr);
	bpf_map_update_elem(&kpt_ct, &rk, &rev, BPF_ANY);
	stat_inc(STAT_DSR_REPLY);
}

/*
 * The endpoint's node, tc ingress, an IPv4 packet with options that may
 * open a connection: with the option, to an endpoint of the named Service
 * on this node, write the reply entry (endpoint -> client, at egress, the
 * source back to the option's address and port; dsr_remember). The packet
 * itself goes on unchanged.
 */
static __always_inline void dsr_receive(struct __sk_buff *skb, const struct pkt *p)
{
	struct dsr_opt4 o;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(struct iphdr), &o, sizeof(o)) < 0 || o.type != DSR_OPT_TYPE ||
	    o.len != DSR_OPT_LEN)
		return;
	union kpt_addr vip;
	addr_from_v4(&vip, o.addr);
	dsr_remember(p, &vip, o.port);
}

/*
 * The same for IPv6, whose option parse() does not follow (it leaves IPv6
 * with extension headers alone): a packet parse() gave up on, read here
 * when its first extension header is a destination-options header of
 * exactly our layout. p is parse()'s scratch, filled in here.
 */
static __always_inline void dsr_receive6(struct __sk_buff *skb, struct pkt *p)
{
	struct {
		struct ipv6hdr ip6;
		struct dsr_opt6 o;
		__be16 sport, dport;
	} h;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &h, sizeof(h)) < 0 || h.ip6.nexthdr != IPPROTO_DSTOPTS_HDR ||
	    h.o.hdrlen != 2 || h.o.type != DSR_OPT6_TYPE || h.o.len != DSR_OPT6_LEN ||
	    (h.o.nexthdr != IPPROTO_TCP && h.o.nexthdr != IPPROTO_UDP))
		return;
	__u32 fam = 1;
	struct cfg_value *cfg = bpf_map_lookup_elem(&kpt_cfg, &fam);
	if (!cfg || !(cfg->flags & CFG_ENABLED) || !(cfg->flags & CFG_DSR))
		return;
	__u8 flags = 0;
	__u32 l4 = ETH_HLEN + sizeof(struct ipv6hdr) + sizeof(struct dsr_opt6);
	if (h.o.nexthdr == IPPROTO_TCP && bpf_skb_load_bytes(skb, l4 + 13, &flags, 1) < 0)
		return;
	if (h.o.nexthdr == IPPROTO_TCP && (flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN)
		return;
	p->v6 = 1;
	p->proto = h.o.nexthdr;
	__builtin_memcpy(p->saddr.b, &h.ip6.saddr, 16);
	__builtin_memcpy(p->daddr.b, &h.ip6.daddr, 16);
	p->sport = h.sport;
	p->dport = h.dport;
	union kpt_addr vip;
	__builtin_memcpy(vip.b, h.o.addr, 16);
	dsr_remember(p, &vip, h.o.port);
}

#endif
