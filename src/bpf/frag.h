/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Fragments of translated connections. Only a datagram's first fragment
 * has the ports that say which connection it belongs to; the later ones share
 * its addresses, protocol and identification and nothing else. So the first
 * fragment's ports are remembered under those (kpt_frag), and a later
 * fragment takes them back: it then finds the connection entry and gets the
 * same address rewrite, without the port and L4 checksum, which live in the
 * first fragment only (its checksum fixup already covers the whole datagram).
 *
 * Fragments are translated as they come, before netfilter reassembles them
 * (tc ingress) or after the node fragmented them again (tc egress). A later
 * fragment that overtakes its first one finds nothing and passes untouched;
 * senders send fragments in order, and a lost datagram is the sender's to
 * repeat. IPv6 fragments count when the fragment header is the first
 * extension header (pkt.h), as senders place it when there is no other.
 */
#ifndef KPT_FRAG_H
#define KPT_FRAG_H

#include "abi.h"
#include "maps.h"
#include "pkt.h"

static __always_inline void frag_key_of(const struct pkt *p, struct frag_key *k)
{
	k->saddr = p->saddr;
	k->daddr = p->daddr;
	k->id = p->frag_id;
	k->proto = p->proto;
	k->pad[0] = k->pad[1] = k->pad[2] = 0;
}

/* A first fragment: keep its ports for the fragments after it. */
static __always_inline void frag_remember(const struct pkt *p)
{
	struct frag_key k;
	struct frag_value v = { .sport = p->sport, .dport = p->dport };
	frag_key_of(p, &k);
	bpf_map_update_elem(&kpt_frag, &k, &v, BPF_ANY);
}

/* A later fragment: its first fragment's ports; -1 when its first fragment was not seen here. */
static __always_inline int frag_ports(struct pkt *p)
{
	struct frag_key k;
	frag_key_of(p, &k);
	struct frag_value *v = bpf_map_lookup_elem(&kpt_frag, &k);
	if (!v)
		return -1;
	p->sport = v->sport;
	p->dport = v->dport;
	return 0;
}

#endif
