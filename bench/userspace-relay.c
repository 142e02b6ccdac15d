// usload: the userspace-relay benchmark's client and backend (single-threaded epoll).
//   server <ip>                         ports 8080 rr (64 B in, 64 B out, close), 8081 echo, 8082 sink
//   rate   <ip> <port> <sec> <conc>     closed loop: one 64 B request per connection
//   paced  <ip> <port> <sec> <rate>     open loop at a fixed connection rate: latency percentiles
//   bulk   <ip> <port> <sec>            one connection writing 256 KiB chunks
//   hold   <ip> <port> <sec> <n>        n persistent connections, 64 B ping-pong each
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define MAXFD 65536
static int ep;
static char buf[262144];

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void nb(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }
static void add(int fd, uint32_t ev) { struct epoll_event e = { .events = ev, .data.fd = fd }; epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e); }
static void mod(int fd, uint32_t ev) { struct epoll_event e = { .events = ev, .data.fd = fd }; epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e); }

/* ---- server ---- */
static int kind[MAXFD]; /* 0 = listener rr, 1 echo, 2 sink for listeners; per conn: port kind */
static int islisten[MAXFD];
static int got[MAXFD];
static int listen_on(const char *ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
  inet_pton(AF_INET, ip, &a.sin_addr);
  if (bind(fd, (void *)&a, sizeof a) || listen(fd, 8192)) { perror("listen"); exit(1); }
  nb(fd); add(fd, EPOLLIN); islisten[fd] = 1;
  return fd;
}
static int server(const char *ip) __attribute__((noreturn));
static int server(const char *ip) {
  kind[listen_on(ip, 8080)] = 0; kind[listen_on(ip, 8081)] = 1; kind[listen_on(ip, 8082)] = 2;
  printf("ready\n"); fflush(stdout);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (islisten[fd]) {
        for (;;) {
          int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
          if (c < 0) break;
          int one = 1; setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          kind[c] = kind[fd]; got[c] = 0; islisten[c] = 0; add(c, EPOLLIN);
        }
        continue;
      }
      ssize_t r = read(fd, buf, sizeof buf);
      if (r <= 0) { if (r < 0 && errno == EAGAIN) continue; close(fd); continue; }
      if (kind[fd] == 1) { if (write(fd, buf, r) < 0) close(fd); }
      else if (kind[fd] == 0) { got[fd] += r; if (got[fd] >= MSG) { if (write(fd, buf, MSG) < 0) {} close(fd); } }
    }
  }
}

/* ---- clients ---- */
static struct sockaddr_in dst;
static double started[MAXFD];
static int rcvd[MAXFD];
static uint32_t *lat; static size_t nlat, caplat = 20000000;
static long done_n, errors;
static int inflight;
static int opened(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) { errors++; return -1; }
  int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (void *)&dst, sizeof dst) < 0 && errno != EINPROGRESS) { close(fd); errors++; return -1; }
  started[fd] = now(); rcvd[fd] = 0; add(fd, EPOLLOUT); inflight++;
  return fd;
}
static int cmp(const void *a, const void *b) { uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b; return x < y ? -1 : x > y; }
static double pct(double p) { if (!nlat) return 0; return lat[(size_t)(p * (nlat - 1))]; }

/* One step of a request connection; returns 1 when the connection finished (ok or error). */
static int step(int fd, uint32_t events, int record) {
  if (events & EPOLLOUT) {
    int err = 0; socklen_t l = sizeof err; getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    if (err || write(fd, buf, MSG) != MSG) { close(fd); inflight--; errors++; return 1; }
    mod(fd, EPOLLIN); return 0;
  }
  ssize_t r = read(fd, buf, sizeof buf);
  if (r > 0) { rcvd[fd] += r; return 0; }
  if (r < 0 && errno == EAGAIN) return 0;
  close(fd); inflight--;
  if (rcvd[fd] >= MSG) { done_n++; if (record && nlat < caplat) lat[nlat++] = (uint32_t)((now() - started[fd]) * 1e6); }
  else errors++;
  return 1;
}

static void report(double secs, const char *extra) {
  qsort(lat, nlat, sizeof *lat, cmp);
  printf("{\"conns\":%ld,\"errors\":%ld,\"seconds\":%.3f,\"rate\":%.1f,\"p50_us\":%.0f,\"p90_us\":%.0f,\"p99_us\":%.0f,\"max_us\":%.0f%s}\n",
         done_n, errors, secs, done_n / secs, pct(0.5), pct(0.9), pct(0.99), nlat ? (double)lat[nlat - 1] : 0, extra);
}

static int rate(double secs, int conc) {
  struct epoll_event evs[512];
  double t0 = now(), warm = t0 + 0.5, end = warm + secs; long base = 0; int measuring = 0;
  for (int i = 0; i < conc; i++) opened();
  while (now() < end) {
    if (!measuring && now() >= warm) { measuring = 1; base = done_n; nlat = 0; errors = 0; }
    int n = epoll_wait(ep, evs, 512, 100);
    for (int i = 0; i < n; i++) if (step(evs[i].data.fd, evs[i].events, 1)) opened();
  }
  done_n -= base; report(secs, ""); return 0;
}

static int paced(double secs, double r) {
  struct epoll_event evs[512];
  double t0 = now() + 0.2, end = t0 + secs, next = t0, interval = 1.0 / r; long late = 0;
  while (now() < end || inflight > 0) {
    double t = now();
    if (t > end + 5) break;
    while (t < end && next <= t) { if (t - next > 0.001) late++; opened(); next += interval; }
    int ms = t < end ? (int)((next - t) * 1000) : 10;
    int n = epoll_wait(ep, evs, 512, ms < 0 ? 0 : ms);
    for (int i = 0; i < n; i++) step(evs[i].data.fd, evs[i].events, 1);
  }
  char extra[64]; snprintf(extra, sizeof extra, ",\"target_rate\":%.1f,\"late_starts\":%ld", r, late);
  report(secs, extra); return 0;
}

static int bulk(double secs) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, (void *)&dst, sizeof dst)) { perror("connect"); return 1; }
  double t0 = now(), warm = t0 + 1, end = warm + secs; long long bytes = 0; int measuring = 0;
  for (;;) {
    double t = now();
    if (!measuring && t >= warm) { measuring = 1; bytes = 0; }
    if (t >= end) break;
    ssize_t w = write(fd, buf, sizeof buf);
    if (w <= 0) { perror("write"); return 1; }
    bytes += w;
  }
  printf("{\"bytes\":%lld,\"seconds\":%.3f,\"gbps\":%.3f}\n", bytes, secs, bytes * 8 / secs / 1e9);
  close(fd); return 0;
}

static int hold(double secs, int n) {
  struct epoll_event evs[512];
  for (int i = 0; i < n; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (void *)&dst, sizeof dst)) { perror("connect"); return 1; }
    nb(fd); add(fd, EPOLLIN); rcvd[fd] = 0;
    if (write(fd, buf, MSG) != MSG) return 1;
  }
  fprintf(stderr, "open %d\n", n);
  double t0 = now(), end = t0 + secs; long rt = 0;
  while (now() < end) {
    int k = epoll_wait(ep, evs, 512, 100);
    for (int i = 0; i < k; i++) {
      int fd = evs[i].data.fd;
      ssize_t r = read(fd, buf, sizeof buf);
      if (r <= 0) { if (r < 0 && errno == EAGAIN) continue; errors++; close(fd); continue; }
      rcvd[fd] += r;
      while (rcvd[fd] >= MSG) { rcvd[fd] -= MSG; rt++; if (write(fd, buf, MSG) != MSG) errors++; }
    }
  }
  printf("{\"roundtrips\":%ld,\"seconds\":%.3f,\"rate\":%.1f,\"errors\":%ld}\n", rt, secs, rt / secs, errors);
  return 0;
}

int main(int argc, char **argv) {
  ep = epoll_create1(0);
  memset(buf, 'x', sizeof buf);
  if (argc < 3) { fprintf(stderr, "usage\n"); return 2; }
  if (!strcmp(argv[1], "server")) return server(argv[2]);
  dst.sin_family = AF_INET; dst.sin_port = htons(atoi(argv[3])); inet_pton(AF_INET, argv[2], &dst.sin_addr);
  lat = malloc(caplat * sizeof *lat);
  double secs = atof(argv[4]);
  if (!strcmp(argv[1], "rate")) return rate(secs, atoi(argv[5]));
  if (!strcmp(argv[1], "paced")) return paced(secs, atof(argv[5]));
  if (!strcmp(argv[1], "bulk")) return bulk(secs);
  if (!strcmp(argv[1], "hold")) return hold(secs, atoi(argv[5]));
  return 2;
}
