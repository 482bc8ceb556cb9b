/* libxs-bench: the xs-bench workloads driven through libxenstore, one forked process per client.
 *
 * Same workloads and output line as src/main.rs (xs-bench), but every request goes through Xen's
 * own client library (xs_open(0), which honours XENSTORED_PATH), so daemons can be compared the
 * way real Xen tools see them: through the library every toolstack uses.
 *
 *   cc -O2 -o libxs-bench libxs-bench.c -lxenstore
 *   XENSTORED_PATH=/path/socket ./libxs-bench --label L --workload 7.1|7.1-create|7.3 \
 *       --clients 128 --txs 500 [--sleep-ms 10] [--daemon-pid PID]
 *
 * A transaction that ends with EAGAIN is retried from xs_transaction_start; its latency runs
 * from the first start to the successful end, and each retry counts one EAGAIN. Children store
 * their latencies in a shared anonymous mapping; the parent reports after reaping them all.
 *
 * CPU cost: `cpu_ms/ktx client=` is the user+system CPU of all client processes (getrusage of
 * the reaped children) per 1000 transactions; with --daemon-pid, `daemon=` is the daemon's
 * utime+stime from /proc/PID/stat over the run (clock-tick resolution) per 1000 transactions,
 * then split into user and system time.
 * On a loaded machine these are steadier than tx/s, which depends on how much CPU was free.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xenstore.h>

struct args {
	const char *label, *workload;
	int clients, txs, sleep_ms, daemon_pid;
};

/* CPU seconds used so far by process pid, from /proc/PID/stat: user in *usr, returns user +
 * system; -1 if unknown. */
static double proc_cpu_s(int pid, double *usr)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* Fields after the command name (which may hold spaces) start at the last ')'. */
	char *p = strrchr(buf, ')');
	unsigned long ut, st;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	*usr = (double)ut / sysconf(_SC_CLK_TCK);
	return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

/* CPU seconds (user + system) of the reaped child processes. */
static double children_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

/* Monotonic time in microseconds. */
static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Print a message with errno and exit the (child or parent) process. */
static void die(const char *what)
{
	fprintf(stderr, "libxs-bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Write a NUL-free string value to path in transaction t, or die. */
static void put(struct xs_handle *h, xs_transaction_t t, const char *path, const char *v)
{
	if (!xs_write(h, t, path, v, strlen(v)))
		die(path);
}

/* The body of one transaction of the chosen workload (n: transaction number). */
static void body(struct xs_handle *h, xs_transaction_t t, const struct args *a, int i, int n)
{
	char path[64], v[16];
	snprintf(v, sizeof v, "%d", n);
	if (strcmp(a->workload, "7.3") == 0) {
		struct timespec d = { a->sleep_ms / 1000, (long)(a->sleep_ms % 1000) * 1000000L };
		snprintf(path, sizeof path, "/bench/c%d/foo", i);
		put(h, t, path, v);
		nanosleep(&d, NULL);
		snprintf(path, sizeof path, "/bench/c%d/bar", i);
		put(h, t, path, v);
	} else {
		unsigned int len;
		void *s = xs_read(h, t, "/bench/shared", &len);
		if (!s)
			die("read /bench/shared");
		free(s);
		snprintf(path, sizeof path, "/bench/c%d/state", i);
		put(h, t, path, v);
	}
}

/* One client process: run a->txs transactions, store latencies (us) in lat, retries in *eagain. */
static void client(const struct args *a, int i, double *lat, long *eagain)
{
	struct xs_handle *h = xs_open(0);
	char path[64];
	if (!h)
		die("xs_open");
	if (strcmp(a->workload, "7.1") == 0) {
		snprintf(path, sizeof path, "/bench/c%d/state", i);
		put(h, XBT_NULL, path, "0");
	}
	for (int n = 0; n < a->txs; n++) {
		double t0 = now_us();
		for (;;) {
			xs_transaction_t t = xs_transaction_start(h);
			if (t == XBT_NULL)
				die("xs_transaction_start");
			body(h, t, a, i, n);
			if (xs_transaction_end(h, t, false))
				break;
			if (errno != EAGAIN)
				die("xs_transaction_end");
			(*eagain)++;
		}
		lat[n] = now_us() - t0;
	}
	xs_close(h);
}

/* qsort comparator for doubles. */
static int cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* Print the xs-bench result line: tx/s, EAGAINs, latency min/avg/p99/max, client-average spread. */
static void report(const struct args *a, double *lat, const long *eagain, double wall_us,
		   double client_cpu_s, double daemon_cpu_s, double daemon_usr_s)
{
	long n = (long)a->clients * a->txs, retries = 0;
	double sum = 0, best = 1e300, worst = 0;
	for (int c = 0; c < a->clients; c++) {
		double s = 0;
		for (int k = 0; k < a->txs; k++)
			s += lat[(long)c * a->txs + k];
		s /= a->txs;
		best = s < best ? s : best;
		worst = s > worst ? s : worst;
		retries += eagain[c];
	}
	qsort(lat, n, sizeof *lat, cmp);
	for (long k = 0; k < n; k++)
		sum += lat[k];
	long p = n * 99 / 100;
	printf("%-28s workload=%-10s clients=%d txs=%d tx/s=%.0f eagain=%ld lat_us min=%.0f avg=%.0f "
	       "p99=%.0f max=%.0f client_avg_us %.0f..%.0f cpu_ms/ktx client=%.0f",
	       a->label, a->workload, a->clients, a->txs, n / (wall_us / 1e6), retries, lat[0],
	       sum / n, lat[p < n ? p : n - 1], lat[n - 1], best, worst, client_cpu_s * 1e6 / n);
	if (daemon_cpu_s >= 0)
		printf(" daemon=%.0f (usr %.0f sys %.0f)", daemon_cpu_s * 1e6 / n,
		       daemon_usr_s * 1e6 / n, (daemon_cpu_s - daemon_usr_s) * 1e6 / n);
	printf("\n");
}

/* Parse --option value pairs (same names as xs-bench; the socket comes from XENSTORED_PATH). */
static void parse(int argc, char **argv, struct args *a)
{
	for (int k = 1; k + 1 < argc; k += 2) {
		const char *o = argv[k], *v = argv[k + 1];
		if (!strcmp(o, "--label"))
			a->label = v;
		else if (!strcmp(o, "--workload"))
			a->workload = v;
		else if (!strcmp(o, "--clients"))
			a->clients = atoi(v);
		else if (!strcmp(o, "--txs"))
			a->txs = atoi(v);
		else if (!strcmp(o, "--sleep-ms"))
			a->sleep_ms = atoi(v);
		else if (!strcmp(o, "--daemon-pid"))
			a->daemon_pid = atoi(v);
		else if (!strcmp(o, "--socket"))
			setenv("XENSTORED_PATH", v, 1);
		else {
			fprintf(stderr, "libxs-bench: unknown option %s\n", o);
			exit(2);
		}
	}
	if (a->clients < 1 || a->txs < 1) {
		fprintf(stderr, "libxs-bench: --clients and --txs must be >= 1\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct args a = { "daemon", "7.1", 128, 500, 10, 0 };
	parse(argc, argv, &a);
	struct xs_handle *h = xs_open(0);
	if (!h)
		die("xs_open (is XENSTORED_PATH set?)");
	/* Fresh tree per run, as xs-bench does: 7.1-create must really create the client nodes. */
	if (!xs_rm(h, XBT_NULL, "/bench") && errno != ENOENT)
		die("rm /bench");
	put(h, XBT_NULL, "/bench/shared", "s");
	xs_close(h);

	size_t lat_bytes = sizeof(double) * a.clients * a.txs;
	size_t bytes = lat_bytes + sizeof(long) * a.clients;
	void *shm = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		die("mmap");
	double *lat = shm;
	long *eagain = (long *)((char *)shm + lat_bytes);

	fflush(stdout);
	double u0 = 0, u1 = 0;
	double d0 = a.daemon_pid ? proc_cpu_s(a.daemon_pid, &u0) : -1;
	double c0 = children_cpu_s();
	double t0 = now_us();
	for (int i = 0; i < a.clients; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			client(&a, i, lat + (long)i * a.txs, &eagain[i]);
			_exit(0);
		}
	}
	int failed = 0, status;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	double wall = now_us() - t0;
	double ccpu = children_cpu_s() - c0;
	double d1 = a.daemon_pid ? proc_cpu_s(a.daemon_pid, &u1) : -1;
	double dcpu = d0 >= 0 && d1 >= 0 ? d1 - d0 : -1;
	if (failed) {
		fprintf(stderr, "libxs-bench: a client failed\n");
		return 1;
	}
	report(&a, lat, eagain, wall, ccpu, dcpu, u1 - u0);
	return 0;
}
