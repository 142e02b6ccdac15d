/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Direct server return for external traffic (--ebpf-lb-mode=dsr, CFG_DSR).
 *
 * A NodePort, externalIP or load-balancer connection with
 * externalTrafficPolicy Cluster from a client outside the node is, in the
 * default snat mode, masqueraded, so that the endpoint's replies come back
 * through the node the client chose. With DSR it is DNATed only, and when
 * the endpoint is on another node, the connection's first packet carries
 * the address and port the client connected to in an IPv4 option of our
 * own. The endpoint's node reads it and writes a reply entry: the
 * endpoint's replies leave that node with the Service's address and port
 * as their source, straight to the client.
 *
 * The option: type 0x9e (copied into fragments, class 0, number 30: the
 * value RFC 4727 sets aside for experiments), length 8, then the port and
 * the IPv4 address, both in network order. It is the first option, right
 * after the 20-byte header: the entering node inserts it there, and only
 * into packets that had no options.
 *
 * Which packets carry it: a TCP SYN (the first one and any retransmit: the
 * connection entry of the entering node has CT_DSR until the client's first
 * ACK) and the first UDP datagram of a flow. If that datagram is lost on the
 * way, the endpoint's node has no entry and the flow's replies go out
 * untranslated (the client drops them) until the client opens a new flow.
 *
 * The endpoint's node does not strip the option: Linux ignores IP options
 * it does not know on packets it receives or forwards, and TCP echoes only
 * the ones it knows (record route, timestamps, source routes), so the pod's
 * stack never answers with it; stripping would cost a second resize of
 * every first packet.
 *
 * The option is trusted only as far as the maps allow: it must name a
 * Service port the node knows (the NodePort entry, or the address's own)
 * whose local set holds the packet's destination, so a forged option can
 * at most make one of this node's endpoints answer as that Service, which
 * it is.
 *
 * IPv6 (which would need a destination-options header) is not done: IPv6
 * connections are masqueraded as in snat mode.
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
 * instead. Only external ports with eTP Cluster, IPv4, from a client that
 * is neither a pod nor an address of this node (those keep their masquerade:
 * the replies must come back through here). A remote endpoint needs a packet
 * that can open the connection, for the option.
 */
static __always_inline int dsr_kind(struct __sk_buff *skb, const struct cfg_value *cfg, const struct svc_value *svc,
				    const struct pkt *p, const struct lb_result *res)
{
	if (!(cfg->flags & CFG_DSR) || p->v6 || svc->kind == KIND_CLUSTER_IP || (svc->flags & SVC_LOCAL_POLICY))
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
static __always_inline int dsr_add_opt(struct __sk_buff *skb, struct pkt *p)
{
	if (p->v6 || p->ihl != sizeof(struct iphdr) || skb->gso_segs > 1)
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

/*
 * The endpoint's node, tc ingress, an IPv4 packet with options that may
 * open a connection: with the option, to an endpoint of the named Service
 * on this node, write the reply entry (endpoint -> client, at egress, the
 * source back to the option's address and port). The packet itself goes on
 * unchanged.
 */
static __always_inline void dsr_receive(struct __sk_buff *skb, const struct pkt *p)
{
	struct dsr_opt4 o;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + sizeof(struct iphdr), &o, sizeof(o)) < 0 || o.type != DSR_OPT_TYPE ||
	    o.len != DSR_OPT_LEN)
		return;
	union kpt_addr vip;
	addr_from_v4(&vip, o.addr);
	/* Another node's address is not in kpt_addrs: then only its NodePort entry can name the port. */
	__u32 *af = bpf_map_lookup_elem(&kpt_addrs, &vip);
	struct svc_value *svc = lookup_service(&vip, o.port, p->proto, 0, (af ? *af : 0) | ADDR_NODEPORT);
	if (!svc || svc->kind == KIND_CLUSTER_IP)
		return;
	struct ep_value ep = { .addr = p->daddr, .port = p->dport };
	if (!dsr_local_endpoint(svc->local_set, &ep))
		return;
	struct ct_key rk = { .saddr = p->daddr, .daddr = p->saddr, .sport = p->dport, .dport = p->sport,
			     .proto = p->proto };
	struct ct_value rev = { .addr = vip, .port = o.port, .svc_id = svc->svc_id, .flags = CT_REPLY | CT_AT_EGRESS,
				.created_ns = bpf_ktime_get_ns() };
	/* Before the entry exists: the first check lets the replies through from the first one on. */
	seen_mark(SEEN_REPLY_SRC, &p->daddr);
	bpf_map_update_elem(&kpt_ct, &rk, &rev, BPF_ANY);
	stat_inc(STAT_DSR_REPLY);
}

#endif
