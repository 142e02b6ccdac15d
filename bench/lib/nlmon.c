// Benchmark helper: reports when an address first reaches the kernel's
// nf_tables ruleset. It listens on the nf_tables netlink multicast group (the
// notifications the kernel sends when a transaction COMMITS), and for every
// new rule or set element prints each IPv4 address of the benchmark's churn
// range 10.64.0.0/10 found in the message bytes, with the wall-clock time:
//
//   <a.b.c.d> <epoch milliseconds, fractional>
//
// `nft monitor` would do the same but first caches the whole ruleset, which
// takes seconds to minutes at 10k Services (and it translates iptables-nft's
// xtables expressions). Raw bytes need no cache. A match inside unrelated
// bytes is possible but harmless: the benchmark ignores sightings that come
// before the change that introduced the address.
//
// Run inside the namespace: ip netns exec <ns> nlmon. Prints "ready" once subscribed.
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

int main(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
  if (fd < 0) {
    perror("socket");
    return 1;
  }
  int size = 256 * 1024 * 1024;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1 << (NFNLGRP_NFTABLES - 1)};
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    perror("bind");
    return 1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("ready\n");
  static unsigned char buf[1 << 20];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == ENOBUFS) {
        fprintf(stderr, "nlmon: ENOBUFS, notifications lost\n");
        printf("lost %.3f\n", now_ms());
        continue;
      }
      if (errno == EINTR) continue;
      perror("recv");
      return 1;
    }
    double t = now_ms();
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      int type = h->nlmsg_type & 0xff;
      if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES) continue;
      if (type != NFT_MSG_NEWRULE && type != NFT_MSG_NEWSETELEM) continue;
      const unsigned char *p = (const unsigned char *)NLMSG_DATA(h);
      size_t len = h->nlmsg_len - NLMSG_HDRLEN;
      for (size_t i = 0; i + 4 <= len; i++) {
        if (p[i] == 10 && p[i + 1] >= 64 && p[i + 1] < 128)
          printf("%u.%u.%u.%u %.3f\n", p[i], p[i + 1], p[i + 2], p[i + 3], t);
      }
    }
  }
}
