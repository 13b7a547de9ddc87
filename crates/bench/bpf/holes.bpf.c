/* The hole watch: a timer pinned to one CPU (the DUT's) that fires every
 * `period_ns` and records each tick that comes later than it should by
 * at least `min_ns`. A late tick means nothing ran on that CPU for that
 * long: on a VM, the host did not run the vCPU (KVM steal time, which
 * this kernel gives a BPF program no way to read); anywhere, interrupts
 * were off that long. Frames the DUT loses in such a hole say nothing
 * about the DUT when the hole outlasts its receive ring.
 *
 * A tick can also come late because the CPU was busy (the timer runs as a
 * softirq, which a busy DUT can hold up): that is the DUT's own doing and
 * no hole. So a late tick counts as a hole only if the CPU was idle from
 * before the tick was due until the tick came: `tern_holes_switch`, on
 * sched_switch, notes when the watched CPU last went idle, and the tick
 * checks that it interrupted the idle task. Late ticks that interrupted
 * anything else are logged too, marked busy (bit 63 of the length), and
 * counted (`busy_late`); they are not holes.
 *
 * `tern_holes` is run once, by BPF_PROG_TEST_RUN from a thread on the
 * watched CPU, to arm the timer there (BPF_F_TIMER_CPU_PIN); the timer
 * re-arms itself from its callback until `stop` is set or the map goes
 * away. The log keeps the last HOLE_LOG holes (their end and length);
 * src/bpf.rs reads it and picks the holes inside a trial's window. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef BPF_F_TIMER_CPU_PIN
#define BPF_F_TIMER_CPU_PIN (1ULL << 1) /* Linux 6.7 */
#endif
#define CLOCK_MONOTONIC 1
#define HOLE_LOG 1024

struct hole_watch {
	struct bpf_timer timer;
	__u64 period_ns; /* set before arming */
	__u64 min_ns;    /* set before arming */
	__u64 last;      /* bpf_ktime_get_ns() of the last tick */
	__u64 ticks;
	__u64 count;     /* late ticks logged in all; tick i is at i % HOLE_LOG */
	__u64 stop;
	__u64 busy_late; /* late ticks that found the CPU busy: not holes */
	__u64 at[HOLE_LOG];  /* when the late tick came (end of the hole) */
	__u64 len[HOLE_LOG]; /* how late it came; bit 63: the CPU was busy */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hole_watch);
} hole_watch SEC(".maps");

/* Kept apart from hole_watch: a tracing program may not use a map that
 * holds a bpf_timer. */
struct hole_cpu {
	__u64 cpu;        /* the watched CPU, set before arming */
	__u64 idle_since; /* when it last switched to the idle task, 0: busy */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hole_cpu);
} hole_cpu SEC(".maps");

static int tick(void *map, __u32 *key, struct hole_watch *h)
{
	__u64 now = bpf_ktime_get_ns();
	if (h->last) {
		__u64 due = h->last + h->period_ns;
		__u64 gap = now - h->last;
		if (gap >= h->period_ns + h->min_ns) {
			/* pid 0: the tick interrupted the idle task. */
			__u32 k = 0;
			struct hole_cpu *c = bpf_map_lookup_elem(&hole_cpu, &k);
			int idle = c && bpf_get_current_pid_tgid() == 0 && c->idle_since && c->idle_since <= due;
			__u32 i = h->count & (HOLE_LOG - 1);
			h->at[i] = now;
			h->len[i] = (gap - h->period_ns) | (idle ? 0 : 1ULL << 63);
			h->count++;
			if (!idle)
				h->busy_late++;
		}
	}
	h->last = now;
	h->ticks++;
	if (!h->stop)
		bpf_timer_start(&h->timer, h->period_ns, BPF_F_TIMER_CPU_PIN);
	return 0;
}

SEC("xdp")
int tern_holes(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct hole_watch *h = bpf_map_lookup_elem(&hole_watch, &k);
	if (!h || !h->period_ns)
		return XDP_ABORTED;
	if (bpf_timer_init(&h->timer, &hole_watch, CLOCK_MONOTONIC))
		return XDP_ABORTED;
	if (bpf_timer_set_callback(&h->timer, tick))
		return XDP_ABORTED;
	if (bpf_timer_start(&h->timer, h->period_ns, BPF_F_TIMER_CPU_PIN))
		return XDP_ABORTED;
	return XDP_PASS;
}

/* sched:sched_switch, as its format file lays it out. */
struct switch_args {
	__u64 common;
	char prev_comm[16];
	__s32 prev_pid;
	__s32 prev_prio;
	__s64 prev_state;
	char next_comm[16];
	__s32 next_pid;
	__s32 next_prio;
};

SEC("tracepoint/sched/sched_switch")
int tern_holes_switch(struct switch_args *ctx)
{
	__u32 k = 0;
	struct hole_cpu *h = bpf_map_lookup_elem(&hole_cpu, &k);
	if (!h || bpf_get_smp_processor_id() != h->cpu)
		return 0;
	h->idle_since = ctx->next_pid == 0 ? bpf_ktime_get_ns() : 0;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
