/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A stand-in for another tool's tc program: counts packets and passes them
 * on. Tests attach it next to ours (as cls_bpf and with tcx) and check that
 * our cleanup leaves it where it was. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} foreign_seen SEC(".maps");

SEC("tc")
int foreign_tc(struct __sk_buff *skb)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&foreign_seen, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return -1; /* TC_ACT_UNSPEC / TCX_NEXT: let the next program decide */
}
