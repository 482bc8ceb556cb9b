/* null-xenstored: the cheapest daemon the libxs-bench workloads can run against, to measure the
 * best transactions/s ANY Xenstore daemon could reach on this machine with these clients.
 *
 * It keeps no store: every request gets a canned but well-formed reply of its own type, with
 * req_id and tx_id copied (libxenstore checks both): TRANSACTION_START -> a fresh transaction id
 * "<n>\0", READ -> "s" (the value libxs-bench wrote to /bench/shared), DIRECTORY -> "" (no
 * children), GET_PERMS -> "b0\0", everything else (WRITE, RM, MKDIR, TRANSACTION_END, ...) ->
 * "OK\0". So the 7.1, 7.1-create and 7.3 workloads run unchanged and never see EAGAIN.
 *
 * The I/O is what a daemon minimally needs: level-triggered epoll, per readiness one recv of
 * whatever the client sent, every complete request in it answered, all the replies to that
 * connection in one send. No per-request allocation.
 *
 *   cc -O2 -o null-xenstored null-xenstored.c
 *   ./null-xenstored [--peek] /path/to/socket   (runs in the foreground; SIGTERM stops it)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { HDR = 16, MAX_PAYLOAD = 4096, IN_CAP = 65536, OUT_CAP = 65536, MAX_FD = 65536 };
enum { T_DIRECTORY = 1, T_READ = 2, T_GET_PERMS = 3, T_TX_START = 6 };

/* One client connection: bytes received but not yet a whole request. */
struct conn {
	uint32_t have;
	unsigned char in[IN_CAP];
};

static struct conn *conns[MAX_FD];
static unsigned char out[OUT_CAP];
static uint32_t next_tx = 1;
/* --peek: look at the request with MSG_PEEK and take its bytes only after the reply went out
 * (what kayvee-xenstored does), to measure that choice on its own. */
static int peek;

/* Print what failed with errno and exit. */
static void die(const char *what)
{
	fprintf(stderr, "null-xenstored: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Append one reply (header copied from the request hdr, type unchanged) to out at *len. */
static void reply(const uint32_t *hdr, const void *payload, uint32_t plen, size_t *len)
{
	uint32_t h[4] = { hdr[0], hdr[1], hdr[2], plen };
	memcpy(out + *len, h, HDR);
	memcpy(out + *len + HDR, payload, plen);
	*len += HDR + plen;
}

/* Answer one request (header hdr) with its canned reply. */
static void answer(const uint32_t *hdr, size_t *len)
{
	char tx[16];
	switch (hdr[0]) {
	case T_TX_START:
		reply(hdr, tx, (uint32_t)snprintf(tx, sizeof tx, "%u", next_tx++) + 1, len);
		break;
	case T_READ:
		reply(hdr, "s", 1, len);
		break;
	case T_DIRECTORY:
		reply(hdr, "", 0, len);
		break;
	case T_GET_PERMS:
		reply(hdr, "b0", 3, len);
		break;
	default:
		reply(hdr, "OK", 3, len);
	}
}

/* Close fd and forget its connection. */
static void drop(int ep, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	free(conns[fd]);
	conns[fd] = NULL;
}

/* One readiness of a client: one recv, answer every whole request, one send. */
static void serve(int ep, int fd)
{
	struct conn *c = conns[fd];
	if (peek)
		c->have = 0; /* the socket still holds everything not taken */
	ssize_t n = recv(fd, c->in + c->have, IN_CAP - c->have, peek ? MSG_PEEK : 0);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		drop(ep, fd);
		return;
	}
	c->have += (uint32_t)n;
	uint32_t at = 0;
	size_t len = 0;
	while (c->have - at >= HDR && len + HDR + 16 <= OUT_CAP) {
		uint32_t hdr[4];
		memcpy(hdr, c->in + at, HDR);
		if (hdr[3] > MAX_PAYLOAD) {
			drop(ep, fd);
			return;
		}
		if (c->have - at < HDR + hdr[3])
			break;
		answer(hdr, &len);
		at += HDR + hdr[3];
	}
	if (!peek) {
		memmove(c->in, c->in + at, c->have - at);
		c->have -= at;
	}
	/* Blocking send of the whole batch: replies are small and clients read them promptly. */
	for (size_t done = 0; done < len;) {
		ssize_t k = send(fd, out + done, len - done, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			drop(ep, fd);
			return;
		}
		done += (size_t)k;
	}
	/* Take the answered requests' bytes (a partial one stays for the next edge). */
	if (peek && at && recv(fd, c->in, at, 0) != (ssize_t)at)
		drop(ep, fd);
}

int main(int argc, char **argv)
{
	peek = argc == 3 && !strcmp(argv[1], "--peek");
	if (argc != 2 + peek) {
		fprintf(stderr, "usage: null-xenstored [--peek] SOCKET\n");
		return 2;
	}
	argv += peek;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
	unlink(argv[1]);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 1024) < 0)
		die("listen");
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = ls };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) < 0)
		die("epoll");
	struct epoll_event evs[256];
	for (;;) {
		int k = epoll_wait(ep, evs, 256, -1);
		if (k < 0 && errno != EINTR)
			die("epoll_wait");
		for (int e = 0; e < k; e++) {
			int fd = evs[e].data.fd;
			if (fd != ls) {
				if (conns[fd])
					serve(ep, fd);
				continue;
			}
			int cfd;
			while ((cfd = accept(ls, NULL, NULL)) >= 0) {
				if (cfd >= MAX_FD || !(conns[cfd] = calloc(1, sizeof(struct conn)))) {
					close(cfd);
					continue;
				}
				struct epoll_event cev = { .events = EPOLLIN | (peek ? EPOLLET : 0),
							   .data.fd = cfd };
				if (epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev) < 0)
					die("epoll_ctl");
			}
		}
	}
}
