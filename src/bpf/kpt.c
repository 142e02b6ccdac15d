/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * kube-proxy-ts ebpf mode: Service load balancing at the tc hooks of every
 * interface of the node (tcx, or cls_bpf where the kernel lacks tcx).
 *
 * Where translation happens, so that netfilter (conntrack, the masquerade
 * table, a CNI's rules) always sees a consistent connection:
 *  - a packet that enters the node (ingress) is DNATed before netfilter
 *    sees it, and its replies get their source rewritten back at egress,
 *    after netfilter: netfilter sees client <-> endpoint both ways;
 *  - a packet the node sends itself reaches tc only at egress, after
 *    netfilter: it is DNATed there and rerouted, and its replies are
 *    rewritten back at ingress: netfilter sees node <-> service both ways.
 * Masquerade is done here too (snat.h): for a connection that entered the
 * node, its source is rewritten at egress and its replies' destination at
 * ingress, so netfilter sees client <-> endpoint; for the node's own, at
 * egress with the DNAT. With --ebpf-lb-mode=dsr, an external connection
 * to another node's endpoint is DNATed only, and that node rewrites the
 * replies' source instead (dsr.h).
 *
 * Most packets are not ours: they leave after a first check (filter.h)
 * that looks at no hash map.
 *
 * Verdicts: every packet that is not dropped, rejected or redirected
 * continues to the next program (TCX_NEXT / TC_ACT_UNSPEC), so programs of
 * other tools on the same hook keep working.
 */
#include "abi.h"
#include "maps.h"
#include "pkt.h"
#include "lb.h"
#include "reply.h"
#include "filter.h"
#include "frag.h"
#include "icmp.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The kernel connection tracker, asked about packets to a Service that have
 * no connection entry of ours. Only the TCP state of an entry is read: the
 * layouts below name the kernel's own types and fields, and libbpf moves the
 * load to wherever the running kernel (or its nf_conntrack module) keeps it
 * (CO-RE), so one object serves 6.1 and 6.18 alike. */
struct ip_ct_tcp {
	__u8 state;
} __attribute__((preserve_access_index));
union nf_conntrack_proto {
	struct ip_ct_tcp tcp;
} __attribute__((preserve_access_index));
struct nf_conn {
	union nf_conntrack_proto proto;
} __attribute__((preserve_access_index));
/* enum tcp_conntrack: a handshake under way */
#define TCP_CONNTRACK_SYN_SENT 1
#define TCP_CONNTRACK_SYN_RECV 2
#define TCP_CONNTRACK_SYN_SENT2 9
struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u16 ct_zone_id;
	__u8 ct_zone_dir;
	__u8 reserved[3];
};
extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *skb, struct bpf_sock_tuple *tuple, __u32 tuple__sz,
					 struct bpf_ct_opts *opts, __u32 opts__sz) __ksym;
extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *ctx, struct bpf_sock_tuple *tuple, __u32 tuple__sz,
					 struct bpf_ct_opts *opts, __u32 opts__sz) __ksym;
extern void bpf_ct_release(struct nf_conn *ct) __ksym;
/* The options' size before conntrack zones were added (6.1 accepts only this one; later kernels accept
 * both). Without zones the fields after `dir` are not needed. */
#define CT_OPTS_OLD_SZ 12

/* A conntrack lookup from either program type: ctx is tc's skb, or with xdp set the XDP program's xdp_md
 * (xdp is a constant where this is inlined, so each program keeps only its own kfunc call). */
static __always_inline struct nf_conn *ct_lookup(void *ctx, int xdp, struct bpf_sock_tuple *t, __u32 tsz,
						 struct bpf_ct_opts *o)
{
	return xdp ? bpf_xdp_ct_lookup(ctx, t, tsz, o, CT_OPTS_OLD_SZ) : bpf_skb_ct_lookup(ctx, t, tsz, o, CT_OPTS_OLD_SZ);
}

#define IP_CT_DIR_ORIGINAL 0
#define IP_CT_DIR_REPLY 1
#define CT_FALLTHROUGH 1000 /* ct_translate: treat the packet as a new flow */
#define CT_STALE 1001       /* ct_translate: the entry is stale; drop it and look again */

static __always_inline void ct_key_of(const struct pkt *p, struct ct_key *k)
{
	k->saddr = p->saddr;
	k->daddr = p->daddr;
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
	k->pad[0] = k->pad[1] = k->pad[2] = 0;
}

static __always_inline int pure_syn(const struct pkt *p)
{
	return (p->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
}

/* Direct server return, instead of masquerade, with --ebpf-lb-mode=dsr (it asks pure_syn). */
#include "dsr.h"

/* The packet's addresses and ports as the socket and conntrack lookups take them; returns the tuple's size. */
static __always_inline __u32 tuple_of(const struct pkt *p, struct bpf_sock_tuple *t)
{
	if (!p->v6) {
		t->ipv4.saddr = p->saddr.w[3];
		t->ipv4.daddr = p->daddr.w[3];
		t->ipv4.sport = p->sport;
		t->ipv4.dport = p->dport;
		return sizeof(t->ipv4);
	}
	__builtin_memcpy(t->ipv6.saddr, p->saddr.w, 16);
	__builtin_memcpy(t->ipv6.daddr, p->daddr.w, 16);
	t->ipv6.sport = p->sport;
	t->ipv6.dport = p->dport;
	return sizeof(t->ipv6);
}

/* What the kernel's connection tracker knows of the packet's tuple: CT_NONE,
 * or the direction of the connection it was seen in; *handshake (when asked
 * for) is set when that connection is a TCP handshake not yet complete.
 * ctx is the tc program's skb, or with xdp set the XDP program's xdp_md: the
 * two lookups differ only in their context (xdp is a constant where this is
 * inlined, so each program keeps only its own call). */
#define CT_NONE (-1)
static __always_inline int kernel_ct(void *ctx, int xdp, const struct pkt *p, int *handshake)
{
	struct bpf_sock_tuple t = {};
	struct bpf_ct_opts o = { .netns_id = -1, .l4proto = p->proto };
	__u32 tsz = tuple_of(p, &t);
	struct nf_conn *ct = ct_lookup(ctx, xdp, &t, tsz, &o);
	if (!ct)
		return CT_NONE;
	int dir = o.dir;
	if (handshake) {
		__u8 st = ct->proto.tcp.state;
		*handshake = st == TCP_CONNTRACK_SYN_SENT || st == TCP_CONNTRACK_SYN_RECV || st == TCP_CONNTRACK_SYN_SENT2;
	}
	bpf_ct_release(ct);
	return dir;
}

/*
 * Without the kernel's connection tracker (nothing in the node's network
 * namespace uses it: the programs masquerade themselves), a datagram is a
 * reply when a local socket is connected to where it comes from, on the
 * port it is sent to.
 */
static __always_inline int connected_udp_socket(void *ctx, const struct pkt *p)
{
	struct bpf_sock_tuple t = {};
	__u32 tsz = tuple_of(p, &t);
	struct bpf_sock *sk = bpf_sk_lookup_udp(ctx, &t, tsz, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	int connected = sk->dst_port != 0;
	bpf_sk_release(sk);
	return connected;
}

/*
 * A packet to one of the node's own addresses that has no connection entry
 * may still belong to a connection the kernel knows: a reply to the node's
 * own socket, or to a masqueraded flow. Such a packet is not a new NodePort
 * flow. TCP says so itself (only a bare SYN opens a connection); for UDP the
 * kernel's connection tracker is asked.
 */
static __always_inline int known_reply(void *ctx, int xdp, const struct pkt *p)
{
	if (p->proto == IPPROTO_TCP)
		return !pure_syn(p);
	int dir = kernel_ct(ctx, xdp, p, 0);
	if (dir != CT_NONE)
		return dir == IP_CT_DIR_REPLY;
	return connected_udp_socket(ctx, p);
}

/*
 * A packet entering the node for a Service, of a connection that netfilter
 * translated: another mode's (iptables, nftables or IPVS) before this one
 * took over the node. Conntrack knows the connection by its Service address
 * only then: a connection we balanced reaches netfilter already translated.
 * Its conntrack entry carries the translation, so the packet is left to
 * netfilter; balancing it again could send the rest of a connection to
 * another endpoint.
 * A bare TCP SYN opens a new connection, unless it is the retransmit of a
 * SYN netfilter sent on a moment before this mode took over (conntrack still
 * in the handshake): balanced here, it could reach another endpoint than
 * the first SYN did, and the client's ACK to the first endpoint's late
 * SYN-ACK would then meet a stranger, which resets. A SYN on an entry past
 * its handshake (TIME_WAIT, CLOSE: the client reuses the ports) is new.
 */
static __always_inline int netfilter_flow(void *ctx, int xdp, const struct pkt *p)
{
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
		return 0;
	if (p->proto == IPPROTO_TCP && pure_syn(p)) {
		int handshake = 0;
		return kernel_ct(ctx, xdp, p, &handshake) == IP_CT_DIR_ORIGINAL && handshake;
	}
	return kernel_ct(ctx, xdp, p, 0) == IP_CT_DIR_ORIGINAL;
}

/* Masquerade by the programs; a connection's packets note how it ends (ct_translate, below). */
#include "snat.h"

/* A packet of a connection we already balanced. */
static __always_inline int ct_translate(struct __sk_buff *skb, struct pkt *p, struct ct_value *ct,
					const struct cfg_value *cfg, int ingress)
{
	int at_egress = !!(ct->flags & CT_AT_EGRESS);
	if (at_egress == !!ingress)
		return TC_ACT_UNSPEC; /* the other hook translates this one */
	if (ct->flags & CT_REPLY) {
		if (ct->flags & CT_AT_EGRESS)
			masquerade_note_client(p, ct); /* only FIN and RST cost a lookup */
		union kpt_addr a = ct->addr;
		if (rewrite(skb, p, 0, &a, ct->port) < 0)
			return TC_ACT_SHOT;
		if (ct->flags & CT_SNAT) {
			union kpt_addr n = ct->nat;
			if (rewrite(skb, p, 1, &n, p->dport) < 0)
				return TC_ACT_SHOT;
		}
		stat_inc(STAT_CT_HIT);
		if ((ct->flags & CT_VIA_LO) && skb->ifindex != LOOPBACK_IFINDEX)
			return to_loopback(skb);
		return TC_ACT_UNSPEC;
	}
	/* A masquerade's reply entry outlives its connection (entries go by LRU); netfilter may later
	 * masquerade another connection onto the same node port towards the endpoint (another mode after a
	 * handover, an iptables rule): then conntrack owns the tuple, and the entry must not take the
	 * replies. Asked when a connection's first reply can come: a SYN-ACK, or any datagram. */
	if ((ct->flags & CT_UNMASQ) && (p->proto == IPPROTO_UDP || (p->tcp_flags & TCP_FLAG_SYN)) &&
	    kernel_ct(skb, 0, p, 0) == IP_CT_DIR_REPLY)
		return CT_STALE;
	if (p->proto == IPPROTO_TCP) {
		if (pure_syn(p) && (ct->flags & CT_SEEN_ACK))
			return CT_FALLTHROUGH; /* the client reuses the ports for a new connection */
		if (!(ct->flags & CT_SEEN_ACK) && (p->tcp_flags & TCP_FLAG_ACK))
			ct->flags |= CT_SEEN_ACK;
		__u8 bit = (ct->flags & CT_UNMASQ) ? close_bit(p, CLOSE_FIN_ENDPOINT) : 0;
		if (bit)
			ct->closing |= bit; /* the endpoint ends a masqueraded connection (snat.h) */
	}
	/* A retransmitted SYN of a DSR connection: the first may have been lost before the endpoint's node. */
	if ((ct->flags & CT_DSR) && pure_syn(p) && dsr_add_opt(skb, p) == -2)
		return TC_ACT_SHOT;
	union kpt_addr a = ct->addr;
	if (rewrite(skb, p, 1, &a, ct->port) < 0)
		return TC_ACT_SHOT;
	if (ct->flags & CT_MASQ) /* masqueraded by netfilter (a kernel before 6.7, or an older version's entry) */
		skb->mark |= cfg->mark;
	stat_inc(STAT_CT_HIT);
	traffic_add(cfg, ct->svc_id, 0, skb->len);
	if (ingress)
		return TC_ACT_UNSPEC;
	if (ct->flags & CT_SNAT) {
		union kpt_addr n = ct->nat;
		if (rewrite(skb, p, 0, &n, p->sport) < 0)
			return TC_ACT_SHOT;
	}
	struct bpf_fib_lookup f;
	return route_send(skb, &f, route_lookup(skb, p, 0, &f));
}

static __always_inline struct svc_value *find_service(struct __sk_buff *skb, const struct pkt *p, int ingress,
						      int *verdict, __u32 *addr_flags)
{
	__u32 *af = bpf_map_lookup_elem(&kpt_addrs, &p->daddr);
	*verdict = TC_ACT_UNSPEC;
	*addr_flags = af ? *af : 0;
	if (!af) {
		struct lpm_key k = { .prefixlen = 128, .addr = p->daddr };
		if (bpf_map_lookup_elem(&kpt_svc_cidrs, &k)) {
			stat_inc(STAT_DROP);
			*verdict = TC_ACT_SHOT; /* inside a ServiceCIDR but not allocated */
		}
		return 0;
	}
	__u32 flags = *af;
	struct svc_value *svc = lookup_service(&p->daddr, p->dport, p->proto, p->v6, flags);
	if (!svc) {
		if (flags & ADDR_CLUSTER_IP)
			*verdict = -2; /* a port the ClusterIP does not define: reject */
		return 0;
	}
	if ((flags & ADDR_LOCAL) && known_reply(skb, 0, p)) {
		stat_inc(STAT_REPLY_SKIP);
		return 0;
	}
	if (ingress && netfilter_flow(skb, 0, p)) {
		stat_inc(STAT_NETFILTER);
		return 0;
	}
	return svc;
}

/*
 * Masquerade of the node's own connection: true when the route to the
 * endpoint prefers another source address than the one the socket has, and
 * no local socket already owns the translated tuple (its replies would be
 * taken for ours). Otherwise the source stays: it is the node's anyway.
 */
static __always_inline int snat_source(struct __sk_buff *skb, const struct pkt *p, struct bpf_fib_lookup *f, int rc)
{
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return 0;
	struct bpf_sock_tuple t = {};
	__u32 tsz;
	if (!p->v6) {
		if (f->ipv4_src == 0 || f->ipv4_src == p->saddr.w[3])
			return 0;
		t.ipv4.saddr = p->daddr.w[3];
		t.ipv4.daddr = f->ipv4_src;
		t.ipv4.sport = p->dport;
		t.ipv4.dport = p->sport;
		tsz = sizeof(t.ipv4);
	} else {
		union kpt_addr src;
		__builtin_memcpy(src.w, f->ipv6_src, 16);
		if (addr_eq(&src, &p->saddr) || !(src.w[0] | src.w[1] | src.w[2] | src.w[3]))
			return 0;
		__builtin_memcpy(t.ipv6.saddr, p->daddr.w, 16);
		__builtin_memcpy(t.ipv6.daddr, f->ipv6_src, 16);
		t.ipv6.sport = p->dport;
		t.ipv6.dport = p->sport;
		tsz = sizeof(t.ipv6);
	}
	struct bpf_sock *sk = p->proto == IPPROTO_TCP ? bpf_skc_lookup_tcp(skb, &t, tsz, BPF_F_CURRENT_NETNS, 0)
						      : bpf_sk_lookup_udp(skb, &t, tsz, BPF_F_CURRENT_NETNS, 0);
	if (sk) {
		bpf_sk_release(sk);
		return 0;
	}
	return 1;
}

static __always_inline int new_flow(struct __sk_buff *skb, struct pkt *p, const struct cfg_value *cfg,
				    const struct ct_key *key, int ingress)
{
	int verdict;
	__u32 af;
	struct svc_value *svc = find_service(skb, p, ingress, &verdict, &af);
	if (!svc) {
		if (verdict == -2) {
			stat_inc(STAT_REJECT);
			return reject(skb, p, ingress);
		}
		return verdict;
	}
	struct lb_result res = {};
	int v = balance(ingress ? skb->ingress_ifindex : 0, cfg, svc, p, &res);
	if (v == V_REJECT) {
		stat_inc(STAT_REJECT);
		return reject(skb, p, ingress);
	}
	if (v != V_DNAT) {
		stat_inc(STAT_DROP);
		return TC_ACT_SHOT;
	}
	/* DSR instead of masquerade (dsr.h): the option goes in before the DNAT, with the address it changes. */
	int dsr = ingress && res.masq ? dsr_kind(skb, cfg, svc, p, &res) : DSR_NONE;
	if (dsr == DSR_REMOTE) {
		int r = dsr_add_opt(skb, p);
		if (r == -2)
			return TC_ACT_SHOT;
		if (r < 0)
			dsr = DSR_NONE;
	}
	if (dsr != DSR_NONE)
		res.masq = 0;
	__u64 now = bpf_ktime_get_ns();
	union kpt_addr client = p->saddr, vip = p->daddr;
	__be16 vport = p->dport;
	if (rewrite(skb, p, 1, &res.ep.addr, res.ep.port) < 0)
		return TC_ACT_SHOT;
	/* Ingress: the source is rewritten at egress, by entries of its own (snat.h).
	 * Egress (the node's own connection): netfilter has run already, so
	 * masquerade here, to the source address the route to the endpoint would use. */
	int masq = ingress && res.masq ? masquerade_in(skb, 0, p, now) : 0;
	if (masq < 0) {
		stat_inc(STAT_DROP);
		return TC_ACT_SHOT;
	}
	struct bpf_fib_lookup f;
	int rc = 0, snat = 0;
	if (!ingress) {
		rc = route_lookup(skb, p, res.masq, &f);
		if (rc < 0 && res.masq)
			rc = route_lookup(skb, p, 0, &f); /* no BPF_FIB_LOOKUP_SRC (before 6.7): the source stays */
		snat = res.masq && snat_source(skb, p, &f, rc);
	}
	union kpt_addr nat = {};
	if (snat) {
		if (p->v6)
			__builtin_memcpy(nat.w, f.ipv6_src, 16);
		else
			addr_from_v4(&nat, f.ipv4_src);
		if (rewrite(skb, p, 0, &nat, p->sport) < 0)
			return TC_ACT_SHOT;
	}
	struct ct_value fwd = { .addr = res.ep.addr, .port = res.ep.port, .svc_id = res.svc_id, .created_ns = now };
	fwd.flags = (ingress ? 0 : CT_AT_EGRESS) | (snat ? CT_SNAT : 0) | (masq == MASQ_BY_MARK ? CT_MASQ : 0) |
		    (dsr == DSR_REMOTE ? CT_DSR : 0);
	if (snat)
		fwd.nat = nat;
	struct ct_key rk = { .saddr = res.ep.addr, .daddr = p->saddr, .sport = res.ep.port, .dport = p->sport,
			     .proto = p->proto };
	struct ct_value rev = { .addr = vip, .port = vport, .svc_id = res.svc_id, .created_ns = now };
	rev.flags = CT_REPLY | (ingress ? CT_AT_EGRESS : ((af & ADDR_LOCAL) ? CT_VIA_LO : 0)) | (snat ? CT_SNAT : 0);
	if (snat)
		rev.nat = client;
	/* With DSR to another node the replies do not come back here; the reply entry still translates the
	 * ICMP errors this node sends the client about the connection's packets (icmp.h).
	 * Before the entries exist: the first check lets their packets through from the first one on. */
	seen_mark(SEEN_REPLY_SRC, &res.ep.addr);
	seen_mark(SEEN_ORIG_DST, &vip);
	bpf_map_update_elem(&kpt_ct, &rk, &rev, BPF_ANY);
	bpf_map_update_elem(&kpt_ct, key, &fwd, BPF_ANY);
	if (masq == MASQ_BY_MARK)
		skb->mark |= cfg->mark;
	stat_inc(STAT_NEW);
	traffic_add(cfg, res.svc_id, 1, skb->len);
	return ingress ? TC_ACT_UNSPEC : route_send(skb, &f, rc);
}

/*
 * A bare SYN on the ports of a connection that is over: the client opens a
 * new one. The old connection's two entries go before the SYN is balanced,
 * because nothing here may balance it (this mode retired in a handover and
 * another mode serves the address, or the Service is gone): its handshake's
 * ACK and everything after it must then not follow the old connection to
 * the old endpoint, which answers with a reset.
 */
static __always_inline void forget_flow(const struct pkt *p, const struct ct_value *ct, const struct ct_key *key)
{
	struct ct_key rk = { .saddr = ct->addr, .daddr = p->saddr, .sport = ct->port, .dport = p->sport,
			     .proto = p->proto };
	if (ct->flags & CT_SNAT)
		rk.daddr = ct->nat;
	struct ct_key out = { .saddr = p->saddr, .daddr = ct->addr, .sport = p->sport, .dport = ct->port,
			      .proto = p->proto };
	masquerade_forget(&out);
	bpf_map_delete_elem(&kpt_ct, &rk);
	bpf_map_delete_elem(&kpt_ct, key);
}

static __always_inline int handle(struct __sk_buff *skb, int ingress)
{
	struct pkt p;
	int pr = parse(skb, &p);
	if (pr < 0 && pr != PARSE_ICMP) {
		/* IPv6 with an extension header parse() does not follow: maybe DSR's option (dsr.h). */
		if (ingress && pr == -1 && skb->protocol == bpf_htons(ETH_P_IPV6))
			dsr_receive6(skb, &p);
		return TC_ACT_UNSPEC;
	}
	__u32 fam = p.v6;
	struct cfg_value *cfg = bpf_map_lookup_elem(&kpt_cfg, &fam);
	if (!cfg || !(cfg->flags & CFG_ENABLED))
		return TC_ACT_UNSPEC;
	if (pr == PARSE_ICMP)
		return icmp_error(skb, &p, ingress);
	/* The endpoint's side of DSR: only IPv4 packets with options (p.ihl is 0 for IPv6) get this far. */
	if (ingress && p.ihl > sizeof(struct iphdr) && (cfg->flags & CFG_DSR) && p.frag != FRAG_LATER &&
	    (p.proto == IPPROTO_UDP || pure_syn(&p)))
		dsr_receive(skb, &p);
	if (!filter_maybe_ours(&p)) {
		stat_inc(STAT_PASS);
		return TC_ACT_UNSPEC;
	}
	if (p.frag == FRAG_LATER) {
		if (frag_ports(&p) < 0)
			return TC_ACT_UNSPEC;
		stat_inc(STAT_FRAG);
	} else if (p.frag == FRAG_FIRST) {
		frag_remember(&p);
	}
	struct ct_key key;
	ct_key_of(&p, &key);
	struct ct_value *ct = bpf_map_lookup_elem(&kpt_ct, &key);
	if (ct) {
		/* Entries made before kpt_seen existed (an upgrade over pinned maps) get their mark from their
		 * next packet; the proxy waits for every entry's mark before it lets the check trust kpt_seen. */
		if (ct->flags & CT_REPLY)
			seen_mark(SEEN_REPLY_SRC, &p.saddr);
		else
			seen_mark(SEEN_ORIG_DST, &p.daddr);
		int r = ct_translate(skb, &p, ct, cfg, ingress);
		if (r == CT_STALE)
			bpf_map_delete_elem(&kpt_ct, &key);
		else if (r != CT_FALLTHROUGH)
			return r;
		else
			forget_flow(&p, ct, &key);
	}
	if (p.frag == FRAG_LATER)
		return TC_ACT_UNSPEC; /* only a first fragment, with its ports, can open a connection */
	return new_flow(skb, &p, cfg, &key, ingress);
}

SEC("tc")
int kpt_ingress(struct __sk_buff *skb)
{
	return handle(skb, 1);
}

SEC("tc")
int kpt_egress(struct __sk_buff *skb)
{
	return handle(skb, 0);
}

/* The socket-level programs share these maps; the loader loads them only
 * with --ebpf-socket-lb-cgroup. */
#include "sock.h"

/* The XDP fast path for traffic from outside; it shares the maps and the
 * helpers above (kernel_ct, known_reply, netfilter_flow). */
#include "xdp.h"
