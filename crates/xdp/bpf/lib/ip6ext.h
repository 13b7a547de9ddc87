// IPv6 extension headers in front of the upper-layer header, for the
// programs that must find ESP or UDP 4500 addressed to the router (steer.c,
// the lane's ip6): tern_wire::ipv6ext::walk's rules, bounded for the
// verifier.
#ifndef TERN_IP6EXT_H
#define TERN_IP6EXT_H

#include <linux/types.h>

// Extension headers walked before giving up (tern_wire's MAX_EXT_HEADERS
// is larger; a chain this long in front of ESP is not seen in practice,
// and what is not found stays where it would have gone without the walk).
#define IP6_EXT_MAX 4

// Hop-by-hop 0, routing 43, fragment 44, AH 51, destination options 60
// (tern_wire IpProtocol::is_ipv6_ext_header).
static __always_inline int ip6_is_ext(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60;
}

// Steps over the extension headers at `p` (just after the fixed header),
// the first announced by `*nh`: returns where the upper-layer header starts
// and leaves its protocol in `*nh`; NULL when a header runs past the frame,
// after IP6_EXT_MAX of them, or at a fragment header whose offset is not
// zero (a later fragment: what follows is the middle of the payload, not
// ESP's SPI or UDP's ports). A first fragment (offset 0) is walked through:
// its upper-layer header is there (RFC 8200 section 4.5).
static __always_inline const __u8 *ip6_skip_ext(const __u8 *p, __u8 *nh, void *end)
{
	__u8 n = *nh;
	for (int i = 0; i < IP6_EXT_MAX; i++) {
		if (!ip6_is_ext(n))
			break;
		if ((void *)(p + 8) > end)
			return 0;
		__u32 len;
		if (n == 44) {
			if (((p[2] << 8) | p[3]) & 0xfff8)
				return 0;
			len = 8;
		} else if (n == 51) {
			len = ((__u32)p[1] + 2) * 4; // RFC 4302 2.2: in 4-byte words, less 2
		} else {
			len = ((__u32)p[1] + 1) * 8; // RFC 8200 4.3-4.6: 8-byte units, less 1
		}
		n = p[0];
		p += len;
	}
	if (ip6_is_ext(n))
		return 0;
	*nh = n;
	return p;
}

// The next header of the fragment header among the extension headers at
// `p` (the first announced by `nh`) when the packet is a fragment (offset
// or M set; not an atomic fragment, RFC 6946): every fragment carries it,
// so the first and the later ones go the same way (ESP's fragments to
// tern, for its reassembly). -1 when it is not a fragment, or the chain
// runs past the frame or IP6_EXT_MAX headers first.
static __always_inline int ip6_frag_nh(const __u8 *p, __u8 nh, void *end)
{
	__u8 n = nh;
	for (int i = 0; i < IP6_EXT_MAX; i++) {
		if (!ip6_is_ext(n) || (void *)(p + 8) > end)
			return -1;
		if (n == 44)
			return (((p[2] << 8) | p[3]) & 0xfff9) ? p[0] : -1;
		__u32 len = n == 51 ? ((__u32)p[1] + 2) * 4 : ((__u32)p[1] + 1) * 8;
		n = p[0];
		p += len;
	}
	return -1;
}

#endif
