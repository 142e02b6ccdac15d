/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The contract between the BPF programs and the proxy: the layout of every
 * map key and value, and the meaning of every flag. Each struct is described
 * once more in src/dataplane/ebpf/abi.ts (field names, order and types);
 * src/dataplane/ebpf/abi.test.ts reads the BTF of the compiled object and
 * fails when the two disagree on a field, an offset or a size, or when a map
 * uses a struct abi.ts does not describe. Change both together, and bump
 * KPT_ABI_VERSION (and ABI_VERSION in abi.ts) so that a proxy with a new
 * layout never adopts maps pinned by an old one.
 *
 * Addresses are 16 bytes for both families: IPv4 as an IPv4-mapped IPv6
 * address (::ffff:a.b.c.d), so one set of maps serves both families and the
 * keys of the two families can never collide. Ports are in network order.
 */
#ifndef KPT_ABI_H
#define KPT_ABI_H

#include <linux/types.h>

#define KPT_ABI_VERSION 1

union kpt_addr {
	__u8 b[16];
	__u32 w[4];
};

/* ---- services: (address, port, protocol) -> what to do ---------------- */

/* The NodePort entry of a service port is keyed with the family's "any"
 * address (:: for IPv6, ::ffff:0.0.0.0 for IPv4); a packet uses it only
 * when its destination carries ADDR_NODEPORT in the addrs map. */
struct svc_key {
	union kpt_addr addr;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

enum svc_kind {
	KIND_CLUSTER_IP = 1,
	KIND_NODE_PORT = 2,
	KIND_EXTERNAL_IP = 3,
	KIND_LOAD_BALANCER = 4,
};

enum svc_flags {
	/* No ready or serving-terminating endpoint anywhere: REJECT. */
	SVC_NO_ENDPOINTS = 1 << 0,
	/* Internal kinds: internalTrafficPolicy Local; external kinds:
	 * externalTrafficPolicy Local. */
	SVC_LOCAL_POLICY = 1 << 1,
	/* LoadBalancer only: the source must match lb_src for this svc_id. */
	SVC_SOURCE_RANGES = 1 << 2,
};

enum lb_algo {
	ALGO_RANDOM = 0,
	ALGO_MAGLEV = 1,      /* Maglev table, hash of the client address and port */
	ALGO_ROUND_ROBIN = 2, /* the set's rr_next, advanced atomically */
	ALGO_SOURCE_HASH = 3, /* Maglev table, hash of the client address alone */
};

struct svc_value {
	__u32 svc_id;        /* one per service port and family; affinity and lb_src key */
	__u32 cluster_set;   /* endpoint set for cluster-policy traffic; 0 = none */
	__u32 local_set;     /* endpoint set for local-policy traffic; 0 = none. With CFG_DSR an external
			      * port with eTP Cluster has one too, with members: its node's endpoints */
	__u32 affinity_secs; /* ClientIP affinity timeout; 0 = no affinity */
	__u16 flags;         /* enum svc_flags */
	__u8 kind;           /* enum svc_kind */
	__u8 algo;           /* enum lb_algo */
};

/* ---- addresses the programs must know about ------------------------- */

enum addr_flags {
	ADDR_LOCAL = 1 << 0,      /* an address of this node */
	ADDR_NODEPORT = 1 << 1,   /* NodePorts are served on it (nodePortAddresses) */
	ADDR_SERVICE = 1 << 2,    /* some svc entry is keyed by it */
	ADDR_CLUSTER_IP = 1 << 3, /* a ClusterIP: ports it does not define are rejected */
};

/* ---- endpoint sets ---------------------------------------------------- */

struct set_value {
	__u32 count;   /* slots 0 .. count-1 of eps are in use */
	__u32 rr_next; /* round-robin: the next turn; the proxy writes 0 with each new count */
};

struct ep_key {
	__u32 set_id;
	__u32 slot;
};

struct ep_value {
	union kpt_addr addr;
	__be16 port;
	__u16 pad;
};

/* (set, endpoint) -> slot: lets affinity check that the endpoint it
 * remembers is still a member of the set it chooses from, and DSR (dsr.h)
 * that an endpoint is in a port's local set, i.e. on this node. */
struct member_key {
	__u32 set_id;
	__be16 port;
	__u16 pad;
	union kpt_addr addr;
};

/* ---- ClientIP affinity (LRU) ----------------------------------------- */

struct aff_key {
	union kpt_addr client;
	__u32 svc_id;
};

struct aff_value {
	union kpt_addr addr;
	__be16 port;
	__u16 pad;
	__u32 pad2;
	__u64 last_ns; /* bpf_ktime_get_ns() of the last new connection */
};

/* ---- loadBalancerSourceRanges, local-pod CIDRs, Service CIDRs (LPM) -- */

struct lpm_svc_key {
	__u32 prefixlen; /* 32 (the svc_id) + bits of the address */
	__u32 svc_id;    /* big-endian, so that it is the leading bytes */
	union kpt_addr addr;
};

struct lpm_key {
	__u32 prefixlen;
	union kpt_addr addr;
};

/* ---- interfaces ------------------------------------------------------- */

struct iface_key {
	__u32 ifindex;
	__u32 family; /* 0 = IPv4, 1 = IPv6: each family's proxy owns its own entries */
};

enum iface_flags {
	IFACE_POD = 1 << 0, /* traffic entering here comes from a local pod (interface detectors) */
};

/* ---- per-family settings (array index 0 = IPv4, 1 = IPv6) ------------- */

enum cfg_flags {
	CFG_ENABLED = 1 << 0,      /* the family has been synced once */
	CFG_DETECT_CIDR = 1 << 1,  /* local pods are the sources in local_cidrs */
	CFG_DETECT_IFACE = 1 << 2, /* local pods enter through IFACE_POD interfaces */
	CFG_MASQ_ALL = 1 << 3,     /* masqueradeAll */
	CFG_TRAFFIC = 1 << 4,      /* count per-Service traffic in kpt_traffic (--service-traffic-metrics) */
	CFG_DSR = 1 << 5,          /* --ebpf-lb-mode=dsr: external traffic to remote endpoints is not
				    * masqueraded; their node answers the client directly (dsr.h) */
};

struct cfg_value {
	__u32 mark;  /* the masquerade bit (1 << masqueradeBit) */
	__u32 flags; /* enum cfg_flags */
	__u64 netns_cookie; /* socket LB acts only in this network namespace */
};

/* ---- connections (LRU) ------------------------------------------------ */

/* Each connection has two entries: the original direction (client ->
 * service address) and the reply direction (endpoint -> client). */
struct ct_key {
	union kpt_addr saddr;
	union kpt_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

enum ct_flags {
	CT_REPLY = 1 << 0,     /* a reply entry: rewrite the source back to addr:port */
	CT_AT_EGRESS = 1 << 1, /* translate at the egress hook (else ingress) */
	CT_MASQ = 1 << 2,      /* original direction: set the masquerade mark (kernels before 6.7; older versions) */
	CT_SEEN_ACK = 1 << 3,  /* TCP: the client sent more than SYNs; a new SYN is a new connection */
	CT_VIA_LO = 1 << 4,    /* reply entry: the service address is the node's own, so the translated
				* reply (now from a local address) must come in through loopback: any other
				* interface drops packets from local addresses (martian source) */
	CT_SNAT = 1 << 5,      /* masqueraded at egress: original direction: the source becomes nat;
				* reply: the destination goes back to nat */
	CT_UNMASQ = 1 << 6,    /* a masquerade's reply entry (snat.h): the destination goes back to the client */
	CT_DSR = 1 << 7,       /* original direction, DSR to another node's endpoint: a SYN (the first one
				* or a retransmit) carries the DSR option (dsr.h) */
};

struct ct_value {
	union kpt_addr addr; /* original: the endpoint; reply: the service address */
	union kpt_addr nat;  /* with CT_SNAT: original: the new source; reply: the client's own address */
	__be16 port;
	__u8 flags;   /* enum ct_flags */
	__u8 closing; /* a masquerade's reply entry (CT_UNMASQ), TCP: enum ct_closing, what its connection sent */
	__u32 svc_id;
	__u64 created_ns;
};

/* How far a masqueraded TCP connection has closed (snat.h): once over, its
 * node port may go to a new connection to the same endpoint. */
enum ct_closing {
	CLOSE_FIN_CLIENT = 1 << 0,   /* the client sent a FIN */
	CLOSE_FIN_ENDPOINT = 1 << 1, /* the endpoint sent a FIN */
	CLOSE_RST = 1 << 2,          /* either side sent a RST */
};

/* ---- fragments (LRU) --------------------------------------------------- */

/* A later fragment carries no ports: the first one's, as it arrived, found by
 * what every fragment of one datagram shares (frag.h). IPv4's 16-bit
 * identification sits in id as the header has it, zero-extended. */
struct frag_key {
	union kpt_addr saddr;
	union kpt_addr daddr;
	__be32 id;
	__u8 proto;
	__u8 pad[3];
};

struct frag_value {
	__be16 sport;
	__be16 dport;
};

/* ---- socket load balancing: what getpeername/recvmsg must undo -------- */

struct sock_key {
	__u64 cookie;
	union kpt_addr addr; /* the endpoint the socket was sent to */
	__be16 port;
	__u8 proto;
	__u8 pad[5];
};

struct sock_value {
	union kpt_addr addr; /* the service address the application asked for */
	__be16 port;
	__u16 pad;
};

/* ---- service-port names, for the proxy's tools (no program reads them) - */

#define KPT_NAME_LEN 160

struct name_value {
	char name[KPT_NAME_LEN]; /* "namespace/name:port", NUL-padded */
};

/* ---- counters (per-CPU array) ----------------------------------------- */

enum stat_index {
	STAT_NEW = 0,       /* new connections balanced */
	STAT_CT_HIT = 1,    /* packets translated from a connection entry */
	STAT_REJECT = 2,
	STAT_DROP = 3,
	STAT_SOCK = 4,      /* connects/sendmsgs balanced at the socket */
	STAT_REPLY_SKIP = 5, /* datagrams to a NodePort left alone because they are replies */
	STAT_NETFILTER = 6,  /* packets of connections netfilter translated, left to it */
	STAT_PASS = 7,       /* packets left alone at the first check (filter.h): not ours */
	STAT_FRAG = 8,       /* later fragments translated like their first fragment */
	STAT_ICMP = 9,       /* ICMP errors about a translated connection, translated back */
	STAT_XDP_NEW = 10,   /* new connections balanced in XDP (xdp.h) */
	STAT_XDP_HIT = 11,   /* packets translated in XDP from a connection entry */
	STAT_XDP_PASS = 12,  /* TCP/UDP packets XDP left to the tc programs untouched */
	STAT_XDP_DROP = 13,  /* new connections XDP dropped: loadBalancerSourceRanges deny the client */
	STAT_DSR_OPT = 14,   /* first packets sent to another node's endpoint with the DSR option (dsr.h) */
	STAT_DSR_REPLY = 15, /* reply entries written from a received DSR option, for a local endpoint */
	STAT_MAX = 16,
};

/* ---- the first check: addresses that may need the programs (filter.h) --
 * Two bitmaps of 64-bit words in array maps (index -> __u64), one bit per
 * hash of an address (filter_hash; src/dataplane/ebpf/filter.ts computes the
 * same). A clear bit proves the address is none of those; a set bit may be a
 * collision, which costs only the full lookups the packet had before.
 *
 * kpt_hot, written by the proxy only: per family (f = 0 IPv4, 1 IPv6) word
 * f * HOT_STRIDE is a header (HOT_VALID: the bitmap describes kpt_addrs and
 * kpt_svc_cidrs of the family; without it everything is looked up), then
 * HOT_WORDS words: the bits of every kpt_addrs key, and of every bucket (an
 * IPv4 /16, an IPv6 /64) that meets a ServiceCIDR.
 *
 * kpt_seen, written by the programs only (atomic ORs): word 0 a header
 * (SEEN_COMPLETE, set by the proxy once every kpt_ct entry has its bit),
 * then SEEN_WORDS words for the sources of reply entries (the endpoints
 * connections were balanced to), then SEEN_WORDS for the destinations of
 * original entries (the service addresses they were sent to). Bits are
 * never cleared: an address that stopped needing them costs what it did
 * before this check. */
#define HOT_BITS_LOG 16
#define HOT_WORDS (1 << (HOT_BITS_LOG - 6))
#define HOT_STRIDE (1 + HOT_WORDS)
#define SEEN_BITS_LOG 19
#define SEEN_WORDS (1 << (SEEN_BITS_LOG - 6))

enum hot_flags {
	HOT_VALID = 1 << 0,
	HOT_ALL = 1 << 1, /* a ServiceCIDR too wide for buckets: every packet is looked up */
};

enum seen_flags {
	SEEN_COMPLETE = 1 << 0,
};

/* ---- per-Service traffic (per-CPU hash, svc_id -> counters) ------------
 * Only with CFG_TRAFFIC. The proxy creates a zeroed entry for each service
 * port it counts (the first N, see --service-traffic-metrics) and deletes it
 * when the port stops being counted; the programs only look entries up and
 * add to them, so a port without an entry costs one failed lookup. Counted:
 * the original direction of each connection (client -> service address),
 * at the one hook that translates it, the first packet included. */
struct traffic_value {
	__u64 conns; /* new connections balanced (first packet of a flow) */
	__u64 bytes; /* L3 bytes (IP header and payload) of every client -> service packet */
};

#endif
