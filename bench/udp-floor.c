/*
 * The kernel's floor for small UDP datagrams on this host: the fewest
 * instructions a user-space sender and receiver can add to the kernel's own
 * per-datagram work (perf: 99 % of the sending CPU is the kernel's).
 * bench/udp-stream-vs-iperf3.sh builds it with cc and runs it beside netrig
 * and iperf3, so that a ratio against iperf3 can be read against what a
 * tool can reach here without GSO (#12's 2x goal). A tool may match it (netrig
 * does, pinned), not pass it by more than the rounds' spread.
 *
 *   udp-floor PORT SECONDS SIZE BATCH [PAUSE_US]
 *
 * A child process receives on 127.0.0.1:PORT with recvmmsg(2) of up to 64:
 * without PAUSE_US, blocking (MSG_WAITFORONE: the sender's kernel wakes it
 * for the first datagram of each batch); with it, reading until the socket is
 * empty and then sleeping PAUSE_US before reading again (no wake-ups: what
 * netrig's receiver does at these rates). The parent sends SIZE-byte
 * datagrams on a connected socket for SECONDS, BATCH per sendmmsg(2) call (1:
 * one send(2) per datagram, as iperf3 does). Each datagram is its own on the
 * wire (no GSO, no GRO). Both sockets keep the host's default buffers. Prints
 * one line: "sent N received M seconds S" (received: what the receiver read by
 * 200 ms after the sender stopped). Not netrig code: no counting beyond a sum,
 * no timestamps, no checks of what arrives.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXB 64
#define MAXSIZE 1472

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: udp-floor PORT SECONDS SIZE BATCH [PAUSE_US]\n");
    return 2;
  }
  int port = atoi(argv[1]), size = atoi(argv[3]), batch = atoi(argv[4]);
  int pause_us = argc == 6 ? atoi(argv[5]) : -1;
  double secs = atof(argv[2]);
  if (port <= 0 || port > 65535 || secs <= 0 || secs > 600 || size < 1 || size > MAXSIZE ||
      batch < 1 || batch > MAXB || (argc == 6 && (pause_us < 0 || pause_us > 100000))) {
    fprintf(stderr, "udp-floor: PORT 1-65535, SECONDS 0-600, SIZE 1-%d, BATCH 1-%d, PAUSE_US 0-100000\n",
            MAXSIZE, MAXB);
    return 2;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int r = socket(AF_INET, SOCK_DGRAM, 0);
  if (r < 0 || bind(r, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("udp-floor: bind");
    return 1;
  }
  /* The receiver's count, shared with the parent. */
  long *got = mmap(NULL, sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (got == MAP_FAILED) {
    perror("udp-floor: mmap");
    return 1;
  }
  *got = 0;
  pid_t child = fork();
  if (child < 0) {
    perror("udp-floor: fork");
    return 1;
  }
  if (child == 0) {
    static char rb[MAXB][2048];
    struct mmsghdr m[MAXB];
    struct iovec v[MAXB];
    double t_now;
    memset(m, 0, sizeof m);
    for (int i = 0; i < MAXB; i++) {
      v[i].iov_base = rb[i];
      v[i].iov_len = sizeof rb[i];
      m[i].msg_hdr.msg_iov = &v[i];
      m[i].msg_hdr.msg_iovlen = 1;
    }
    /* Every wait is bounded: the receiver gives up 200 ms after the last datagram. */
    struct timeval to = {0, 200000};
    setsockopt(r, SOL_SOCKET, SO_RCVTIMEO, &to, sizeof to);
    double limit = now() + secs + 10, last = 0;
    long n = 0;
    while ((t_now = now()) < limit) {
      int k = recvmmsg(r, m, MAXB, pause_us < 0 ? MSG_WAITFORONE : MSG_DONTWAIT, NULL);
      if (k > 0) {
        n += k;
        *got = n;
        last = t_now;
      } else if (n > 0 && t_now - last > 0.2) {
        break;
      } else if (pause_us >= 0) {
        usleep(pause_us);
      }
    }
    _exit(0);
  }
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("udp-floor: connect");
    kill(child, SIGKILL);
    return 1;
  }
  static char buf[MAXB][MAXSIZE];
  memset(buf, 0x42, sizeof buf);
  struct mmsghdr m[MAXB];
  struct iovec v[MAXB];
  memset(m, 0, sizeof m);
  for (int i = 0; i < MAXB; i++) {
    v[i].iov_base = buf[i];
    v[i].iov_len = size;
    m[i].msg_hdr.msg_iov = &v[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  usleep(100000); /* the receiver is waiting */
  long sent = 0;
  double t0 = now(), t;
  do {
    if (batch == 1) {
      if (send(s, buf[0], size, 0) == size) sent++;
    } else {
      int k = sendmmsg(s, m, batch, 0);
      if (k > 0) sent += k;
    }
  } while ((t = now()) - t0 < secs);
  waitpid(child, NULL, 0);
  printf("sent %ld received %ld seconds %.6f\n", sent, *got, t - t0);
  return 0;
}
