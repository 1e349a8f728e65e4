/*
 * pvm-glue/mcgroup.h — which multicast group an endpoint joins, and the
 * address of the multicast layer's unicast endpoint beside it (mcast.c;
 * tests/test_verbs_mcast.c runs the same two on the verbs model).
 *
 * pvm_pmcast multicasts on every endpoint whose nic says it can
 * (RCP_NIC_CAP_MCAST): the capability decides, never the transport's
 * name.  What a group is called, though, is the address syntax of that
 * endpoint's family (an IP group and port, an InfiniBand MGID), so the
 * groups are a list, one per address scheme, and an endpoint takes the
 * first whose scheme (the text up to the first ':') is its own.  The
 * defaults: IPv4 239.255.82.67 (administratively scoped), and on
 * InfiniBand MGID ff12:5243::7076:6d63 (ff1 transient, 2 link-local scope;
 * "RC" and "pvmc"), clear of IPoIB's ff12:401b:: groups.
 *
 * No library state: static inline, string work only.
 */
#ifndef PVMRCP_MCGROUP_H
#define PVMRCP_MCGROUP_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PR_MCN_GROUPS "udp:239.255.82.67:47067 verbs:mcast:ff12:5243::7076:6d63"

/* The group in LIST (separated by spaces or commas) of ADDR's scheme into
 * OUT; 0, or -1 if LIST has none (or it does not fit). */
static inline int pr_mcn_group(const char *list, const char *addr, char *out, size_t len)
{
	const char *colon = addr ? strchr(addr, ':') : NULL;
	size_t sl = colon ? (size_t)(colon - addr) + 1 : 0;

	if (!list || !sl)
		return -1;
	while (*list) {
		size_t n = strcspn(list, " ,");
		if (n > sl && !strncmp(list, addr, sl)) {
			if (n >= len)
				return -1;
			memcpy(out, list, n);
			out[n] = '\0';
			return 0;
		}
		list += n;
		list += strspn(list, " ,");
	}
	return -1;
}

/* The address of a second endpoint beside the endpoint whose address is
 * ADDR: the same interface or HCA port, any port or queue pair.  A
 * peer-form address ("verbs:DEV:PORT@QPN/LID") loses its '@' part, any
 * other its last ':' part (udp's port: "udp:IP:" is any port).  0, or -1. */
static inline int pr_mcn_beside(const char *addr, char *out, size_t len)
{
	const char *at = strchr(addr, '@'), *end = at ? at : strrchr(addr, ':');

	if (!end || !strchr(addr, ':') || (size_t)(end - addr) + 2 > len)
		return -1;
	snprintf(out, len, "%.*s", (int)(end - addr + (at ? 0 : 1)), addr);
	return 0;
}

/* The InfiniBand multicast group of PVM group NAME in SCOPE (the VM;
 * session 21): "verbs:mcast:ff12:5243:7067:H:H:H:H:H", the MGID's last
 * 80 bits a hash (FNV-1a, 64 bits, then 16 more) of SCOPE and NAME.  So
 * every task of a VM derives the same group from the name alone, with no
 * registry, and two PVM groups get two MGIDs: each HCA port is attached
 * only to the groups its tasks joined, and the switches carry a group's
 * datagrams only to its members' ports.  "7067" ("pg") keeps the derived
 * groups clear of the VM-wide default (…:7076:6d63).  0, or -1 if OUT is
 * too short. */
static inline int pr_mcn_pvm_group(const char *name, const char *scope, char *out, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull, h2;
	const char *parts[2] = {scope ? scope : "", name ? name : ""};

	if (len < 52) /* the longest: 27 + 5 * 4 + 4 colons + NUL */
		return -1;

	for (int k = 0; k < 2; k++) {
		for (const char *c = parts[k]; *c; c++)
			h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull; /* "a","bc" differs from "ab","c" */
	}
	h2 = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
	snprintf(out, len, "verbs:mcast:ff12:5243:7067:%x:%x:%x:%x:%x",
	         (unsigned)(h >> 48) & 0xffff, (unsigned)(h >> 32) & 0xffff,
	         (unsigned)(h >> 16) & 0xffff, (unsigned)h & 0xffff, (unsigned)(h2 >> 48) & 0xffff);
	return 0;
}

#endif
