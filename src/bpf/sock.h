/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket-level load balancing (--ebpf-socket-lb-cgroup): connect() and
 * unconnected sendmsg() to a service address are sent to an endpoint
 * directly, so no packet ever carries the service address and the tc
 * programs have nothing to translate. recvmsg() and getpeername() show the
 * service address again, so applications see the address they asked for.
 *
 * Every process in the cgroup tree is served, in the node's network
 * namespace (the node and host-network pods) and in any other (pods). What
 * needs per-packet knowledge or a translation of the source is left to the
 * tc programs, which then handle the connection as they do without socket
 * balancing:
 *  - ClientIP affinity and source ranges: the client address is not chosen
 *    yet at connect time;
 *  - no endpoints (the tc programs reject) and an empty local set (they drop);
 *  - Maglev and source hashing: they hash the source, which a connect() does
 *    not have yet (random and round-robin are chosen here as tc would);
 *  - from a pod, what the tc path would masquerade: masqueradeAll, and
 *    external addresses with externalTrafficPolicy Cluster. (The node's own
 *    connections need no masquerade: the kernel picks the source address the
 *    route to the endpoint has, as the tc path's masquerade would.)
 */
#ifndef KPT_SOCK_H
#define KPT_SOCK_H

#include "lb.h"

/* The family's config when socket balancing is on; *node: the socket is in
 * the node's network namespace. */
static __always_inline int sock_family_ok(struct bpf_sock_addr *ctx, __u32 fam, struct cfg_value **cfg, int *node)
{
	*cfg = bpf_map_lookup_elem(&kpt_cfg, &fam);
	if (!*cfg || !((*cfg)->flags & CFG_ENABLED))
		return 0;
	*node = !(*cfg)->netns_cookie || bpf_get_netns_cookie(ctx) == (*cfg)->netns_cookie;
	return 1;
}

static __always_inline void sock_dst(struct bpf_sock_addr *ctx, int v6, union kpt_addr *a)
{
	if (!v6) {
		addr_from_v4(a, ctx->user_ip4);
		return;
	}
	a->w[0] = ctx->user_ip6[0];
	a->w[1] = ctx->user_ip6[1];
	a->w[2] = ctx->user_ip6[2];
	a->w[3] = ctx->user_ip6[3];
}

/* The endpoint for a connect/sendmsg, or 0 to leave the connection to tc.
 * node: the socket is in the node's network namespace. */
static __always_inline int sock_pick(const struct cfg_value *cfg, const union kpt_addr *dst, __be16 port, __u8 proto,
				     int v6, int node, struct ep_value *out)
{
	__u32 *af = bpf_map_lookup_elem(&kpt_addrs, dst);
	if (!af)
		return 0;
	struct svc_value *svc = lookup_service(dst, port, proto, v6, *af);
	if (!svc || (svc->flags & (SVC_NO_ENDPOINTS | SVC_SOURCE_RANGES)) || svc->affinity_secs)
		return 0;
	if (svc->algo == ALGO_MAGLEV || svc->algo == ALGO_SOURCE_HASH)
		return 0;
	int external = svc->kind != KIND_CLUSTER_IP;
	if (!node && ((cfg->flags & CFG_MASQ_ALL) || (external && !(svc->flags & SVC_LOCAL_POLICY))))
		return 0;
	/* Internal traffic policy Local: the local set. External addresses with
	 * policy Local send the node's and local pods' traffic to the cluster set
	 * (upstream's short-circuit). */
	__u32 set_id = (!external && (svc->flags & SVC_LOCAL_POLICY)) ? svc->local_set : svc->cluster_set;
	struct set_value *set = set_id ? bpf_map_lookup_elem(&kpt_sets, &set_id) : 0;
	if (!set || set->count == 0)
		return 0;
	__u32 slot = svc->algo == ALGO_ROUND_ROBIN ? __sync_fetch_and_add(&set->rr_next, 1) % set->count
						   : bpf_get_prandom_u32() % set->count;
	struct ep_key ek = { .set_id = set_id, .slot = slot };
	struct ep_value *ep = bpf_map_lookup_elem(&kpt_eps, &ek);
	if (!ep)
		return 0;
	*out = *ep;
	return 1;
}

static __always_inline int sock_forward(struct bpf_sock_addr *ctx, int v6)
{
	struct cfg_value *cfg;
	int node;
	if (!sock_family_ok(ctx, v6, &cfg, &node))
		return 1;
	__u8 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	union kpt_addr dst;
	sock_dst(ctx, v6, &dst);
	__be16 port = (__be16)ctx->user_port;
	struct ep_value ep;
	if (!sock_pick(cfg, &dst, port, proto, v6, node, &ep))
		return 1;
	struct sock_key sk = { .cookie = bpf_get_socket_cookie(ctx), .addr = ep.addr, .port = ep.port, .proto = proto };
	struct sock_value sv = { .addr = dst, .port = port };
	bpf_map_update_elem(&kpt_sock, &sk, &sv, BPF_ANY);
	if (!v6) {
		ctx->user_ip4 = ep.addr.w[3];
	} else {
		ctx->user_ip6[0] = ep.addr.w[0];
		ctx->user_ip6[1] = ep.addr.w[1];
		ctx->user_ip6[2] = ep.addr.w[2];
		ctx->user_ip6[3] = ep.addr.w[3];
	}
	ctx->user_port = ep.port;
	stat_inc(STAT_SOCK);
	return 1;
}

/* getpeername() and recvmsg(): show the service address the socket was opened to. */
static __always_inline int sock_reverse(struct bpf_sock_addr *ctx, int v6)
{
	struct cfg_value *cfg;
	int node;
	if (!sock_family_ok(ctx, v6, &cfg, &node))
		return 1;
	struct sock_key sk = { .cookie = bpf_get_socket_cookie(ctx), .port = (__be16)ctx->user_port,
			       .proto = ctx->protocol };
	sock_dst(ctx, v6, &sk.addr);
	struct sock_value *sv = bpf_map_lookup_elem(&kpt_sock, &sk);
	if (!sv)
		return 1;
	if (!v6) {
		ctx->user_ip4 = sv->addr.w[3];
	} else {
		ctx->user_ip6[0] = sv->addr.w[0];
		ctx->user_ip6[1] = sv->addr.w[1];
		ctx->user_ip6[2] = sv->addr.w[2];
		ctx->user_ip6[3] = sv->addr.w[3];
	}
	ctx->user_port = sv->port;
	return 1;
}

SEC("cgroup/connect4")
int kpt_connect4(struct bpf_sock_addr *ctx)
{
	return sock_forward(ctx, 0);
}

SEC("cgroup/connect6")
int kpt_connect6(struct bpf_sock_addr *ctx)
{
	return sock_forward(ctx, 1);
}

SEC("cgroup/sendmsg4")
int kpt_sendmsg4(struct bpf_sock_addr *ctx)
{
	return sock_forward(ctx, 0);
}

SEC("cgroup/sendmsg6")
int kpt_sendmsg6(struct bpf_sock_addr *ctx)
{
	return sock_forward(ctx, 1);
}

SEC("cgroup/recvmsg4")
int kpt_recvmsg4(struct bpf_sock_addr *ctx)
{
	return sock_reverse(ctx, 0);
}

SEC("cgroup/recvmsg6")
int kpt_recvmsg6(struct bpf_sock_addr *ctx)
{
	return sock_reverse(ctx, 1);
}

SEC("cgroup/getpeername4")
int kpt_getpeername4(struct bpf_sock_addr *ctx)
{
	return sock_reverse(ctx, 0);
}

SEC("cgroup/getpeername6")
int kpt_getpeername6(struct bpf_sock_addr *ctx)
{
	return sock_reverse(ctx, 1);
}

#endif
