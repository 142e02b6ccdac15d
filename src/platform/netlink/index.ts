// Netlink, the kernel's message interface, spoken directly (no `nft`,
// `ipvsadm` or `ip` process per change):
//
//   attr.ts     struct nlattr lists: encode a tree, decode into `Attrs`
//   message.ts  struct nlmsghdr: encode one message, split a datagram, NLM_F flags, errno names
//   socket.ts   NetlinkSocket (koffi + libc): send, receive, `ackAll` for a batch of
//               acked requests, `dump`; opened in our namespace or a named one
//   genl.ts     generic netlink: resolve a family id by name (IPVS is one)
//
// Users: every nf_tables sync (../nftables/netlink.ts), IPVS virtual and
// real servers (../ipvs/), kube-ipvs0 and its addresses over rtnetlink
// (../ipvs/). All calls are synchronous and bounded by a receive timeout.
export * from './attr.js';
export * from './message.js';
export * from './socket.js';
export * from './genl.js';
