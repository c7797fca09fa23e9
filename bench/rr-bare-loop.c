/*
 * A bare loop of request/response on this host: one flow of 1-byte requests
 * and 1-byte responses, closed loop, each end blocking in its own send(2)
 * and recv(2), as netperf's TCP_RR and UDP_RR loops do, with nothing else
 * around them (no timing per transaction, no counting beyond a sum).
 * bench/rr-vs-peers.sh builds it with cc and runs it beside netrig, netperf
 * and sockperf: a tool at the bare loop's rate adds nothing to the kernel's
 * cost of this method. It is not a floor of every method: netrig's one-flow
 * workers measured 1.06-1.17x it (2026-11-28), and spinning instead of
 * blocking (--busy-wait, sockperf's modes) is another method altogether.
 *
 *   rr-bare-loop tcp|udp PORT SECONDS
 *
 * A child process answers on 127.0.0.1:PORT; the parent asks for SECONDS and
 * prints "transactions N seconds S". TCP with TCP_NODELAY on both ends. Every
 * wait is bounded, without a timer per call (a socket timeout arms and
 * cancels a kernel timer every time a call sleeps: netrig's one-flow
 * workers made 1.11x the transactions/s without them, and netperf's loop
 * does not pay it either): an
 * alarm 2 s past the end interrupts the asker's wait (a lost UDP datagram
 * ends the run early with what was counted, and says so), and the responder
 * dies by its own alarm 5 s past the end if nothing ended it before.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void on_alarm(int sig) { (void)sig; }

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "udp"))) {
    fprintf(stderr, "usage: rr-bare-loop tcp|udp PORT SECONDS\n");
    return 2;
  }
  int tcp = !strcmp(argv[1], "tcp"), port = atoi(argv[2]);
  double secs = atof(argv[3]);
  if (port <= 0 || port > 65535 || secs <= 0 || secs > 600) {
    fprintf(stderr, "rr-bare-loop: PORT 1-65535, SECONDS 0-600\n");
    return 2;
  }
  int type = tcp ? SOCK_STREAM : SOCK_DGRAM, one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int l = socket(AF_INET, type, 0);
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || (tcp && listen(l, 1) < 0)) {
    perror("rr-bare-loop: bind");
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("rr-bare-loop: fork");
    return 1;
  }
  char b = 'x';
  if (child == 0) {
    alarm((unsigned)secs + 5);
    int s = l;
    if (tcp) {
      s = accept(l, NULL, NULL);
      if (s < 0) _exit(1);
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    /* The responder ends when the asker closes (TCP), is killed (UDP) or by its alarm. */
    struct sockaddr_in peer;
    socklen_t pl = sizeof peer;
    for (;;) {
      ssize_t n = tcp ? recv(s, &b, 1, 0) : recvfrom(s, &b, 1, 0, (struct sockaddr *)&peer, &pl);
      if (n <= 0) _exit(0);
      if ((tcp ? send(s, &b, 1, 0) : sendto(s, &b, 1, 0, (struct sockaddr *)&peer, pl)) != 1)
        _exit(0);
    }
  }
  int s = socket(AF_INET, type, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("rr-bare-loop: connect");
    kill(child, SIGKILL);
    return 1;
  }
  if (tcp) setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* No SA_RESTART: the alarm makes a blocked call return EINTR. */
  struct sigaction sa = {.sa_handler = on_alarm};
  sigaction(SIGALRM, &sa, NULL);
  alarm((unsigned)secs + 2);
  long n = 0;
  int lost = 0;
  double t0 = now(), t;
  do {
    if (send(s, &b, 1, 0) != 1 || recv(s, &b, 1, 0) != 1) {
      lost = 1;
      break;
    }
    n++;
  } while ((t = now()) - t0 < secs);
  t = now();
  close(s);
  if (!tcp) kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  printf("transactions %ld seconds %.6f%s\n", n, t - t0, lost ? " (ended early: a wait timed out)" : "");
  return 0;
}
