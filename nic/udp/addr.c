/*
 * nic/udp/addr.c — the udp backend: addresses, MTU and buffer sizing
 * (design notes: nic/udp/udp_int.h).
 */
#include "nic/udp/udp_int.h"

/* ---- addresses --------------------------------------------------------- */

socklen_t rcpi_udp_sa_len(const union udp_sa *sa)
{
	return sa->sa.sa_family == AF_INET6 ? sizeof sa->in6 : sizeof sa->in;
}

int rcpi_udp_v6_needs_scope(const struct in6_addr *a)
{
	return IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_MC_LINKLOCAL(a);
}

int rcpi_udp_sa_is_loopback(const union udp_sa *sa)
{
	if (sa->sa.sa_family == AF_INET)
		return (ntohl(sa->in.sin_addr.s_addr) >> 24) == 127;
	if (IN6_IS_ADDR_LOOPBACK(&sa->in6.sin6_addr))
		return 1;
	return IN6_IS_ADDR_V4MAPPED(&sa->in6.sin6_addr) && sa->in6.sin6_addr.s6_addr[12] == 127;
}

int rcpi_udp_sa_is_unspecified(const union udp_sa *sa)
{
	if (sa->sa.sa_family == AF_INET)
		return sa->in.sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&sa->in6.sin6_addr);
}

int rcpi_udp_sa_is_mcast(const union udp_sa *sa)
{
	return sa->sa.sa_family == AF_INET && IN_MULTICAST(ntohl(sa->in.sin_addr.s_addr));
}

uint16_t rcpi_udp_sa_port(const union udp_sa *sa)
{
	return sa->sa.sa_family == AF_INET6 ? sa->in6.sin6_port : sa->in.sin_port;
}

int rcpi_udp_sa_to_key(const union udp_sa *sa, struct udp_key *k)
{
	memset(k, 0, sizeof *k);
	if (sa->sa.sa_family == AF_INET) {
		k->addr[0] = sa->in.sin_addr.s_addr;
		k->port = sa->in.sin_port;
		k->fam = 4;
		return 0;
	}
	if (sa->sa.sa_family == AF_INET6) {
		memcpy(k->addr, &sa->in6.sin6_addr, 16);
		/* The kernel reports a scope id for link-local sources only;
		 * drop any other so a peer added as "[2001:db8::1%2]" still
		 * matches its frames. */
		if (rcpi_udp_v6_needs_scope(&sa->in6.sin6_addr))
			k->scope = sa->in6.sin6_scope_id;
		k->port = sa->in6.sin6_port;
		k->fam = 6;
		return 0;
	}
	return -1;
}

uint32_t rcpi_udp_key_hash(const struct udp_key *k)
{
	uint64_t h;

	h = ((uint64_t)k->addr[0] << 32 | k->addr[1]) * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)k->addr[2] << 32 | k->addr[3]) * 0xc2b2ae3d27d4eb4full;
	h ^= ((uint64_t)k->scope << 32 | (uint64_t)k->port << 8 | k->fam) * 0x165667b19e3779f9ull;
	h ^= h >> 31;
	h *= 0xd6e8feb86659fd93ull;
	return (uint32_t)(h >> 32);
}

/* Writes SA's blob into B (UDP_BLOB_MAX bytes); returns its length, or 0
 * for an address of no family we know. */
uint32_t rcpi_udp_sa_to_blob(const union udp_sa *sa, uint8_t *b)
{
	b[0] = RCPI_NIC_UDP;
	if (sa->sa.sa_family == AF_INET) {
		b[1] = 4;
		memcpy(b + 2, &sa->in.sin_port, 2);
		memcpy(b + 4, &sa->in.sin_addr, 4);
		return 8;
	}
	if (sa->sa.sa_family == AF_INET6) {
		uint32_t scope = sa->in6.sin6_scope_id;
		b[1] = 6;
		memcpy(b + 2, &sa->in6.sin6_port, 2);
		memcpy(b + 4, &sa->in6.sin6_addr, 16);
		if (!scope || !rcpi_udp_v6_needs_scope(&sa->in6.sin6_addr))
			return 20;
		scope = htonl(scope);
		memcpy(b + 20, &scope, 4);
		return 24;
	}
	return 0;
}

int rcpi_udp_blob_to_sa(const uint8_t *b, size_t len, union udp_sa *sa)
{
	memset(sa, 0, sizeof *sa);
	if (len < 2 || b[0] != RCPI_NIC_UDP)
		return RCP_EADDR;
	if (b[1] == 4 && len == 8) {
		sa->in.sin_family = AF_INET;
		memcpy(&sa->in.sin_port, b + 2, 2);
		memcpy(&sa->in.sin_addr, b + 4, 4);
		return 0;
	}
	if (b[1] == 6 && (len == 20 || len == 24)) {
		sa->in6.sin6_family = AF_INET6;
		memcpy(&sa->in6.sin6_port, b + 2, 2);
		memcpy(&sa->in6.sin6_addr, b + 4, 16);
		if (len == 24) {
			uint32_t scope;
			memcpy(&scope, b + 20, 4);
			sa->in6.sin6_scope_id = ntohl(scope);
		}
		return 0;
	}
	return RCP_EADDR;
}

/* Host syntax, checked before getaddrinfo so that junk is refused locally
 * instead of becoming a DNS query.  *NUMERIC is set when HOST must be a
 * numeric address (bracketed IPv6, or only digits and dots: a real host
 * name never is). */
static int host_ok(const char *host, int bracketed, int *numeric)
{
	size_t n = strlen(host), label = 0;

	if (!n || n > UDP_HOST_MAX)
		return 0;
	if (bracketed) {
		const char *pct = strchr(host, '%');
		size_t alen = pct ? (size_t)(pct - host) : n;
		*numeric = 1;
		if (!alen || strspn(host, "0123456789abcdefABCDEF:.") != alen ||
		    !memchr(host, ':', alen))
			return 0;
		if (pct && (!pct[1] || strspn(pct + 1, "abcdefghijklmnopqrstuvwxyz"
		                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
		                           strlen(pct + 1)))
			return 0;
		return 1;
	}
	*numeric = strspn(host, "0123456789.") == n;
	if (*numeric)
		return 1;
	/* RFC 1123 names: labels of 1-63 letters, digits, '-' (and '_',
	 * seen in the wild), not starting or ending with '-'. */
	for (size_t i = 0; i <= n; i++) {
		char c = host[i];
		if (c == '.' || !c) {
			if (!label || host[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return 0;
		if (c == '-' && !label)
			return 0;
		if (++label > 63)
			return 0;
	}
	return 1;
}

/* Parses REST ("HOST:PORT", "[V6]:PORT", "HOST:", or "" when PASSIVE, i.e.
 * for binding) into SA.  FAMILY restricts the result (AF_UNSPEC: either,
 * IPv4 preferred).  Peers (PASSIVE == 0) need a port and a host. */
int rcpi_udp_parse(const char *rest, int passive, int family, union udp_sa *sa)
{
	char host[UDP_HOST_MAX + 1], portstr[8];
	const char *h, *hend, *port;
	struct addrinfo hints, *res = NULL, *ai, *pick = NULL;
	int bracketed = 0, numeric = 0, rc;
	unsigned long pv = 0;
	size_t hl, pl;

	memset(sa, 0, sizeof *sa);
	if (!*rest) {
		if (!passive || family == AF_INET6)
			return RCP_EADDR;
		sa->in.sin_family = AF_INET;
		sa->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (*rest == '[') {
		h = rest + 1;
		hend = strchr(h, ']');
		if (!hend || hend[1] != ':' || family == AF_INET)
			return RCP_EADDR;
		port = hend + 2;
		bracketed = 1;
	} else {
		h = rest;
		hend = strrchr(rest, ':');
		/* No port separator, or an IPv6 address without brackets. */
		if (!hend || memchr(h, ':', (size_t)(hend - h)))
			return RCP_EADDR;
		port = hend + 1;
	}
	hl = (size_t)(hend - h);
	if (!hl || hl > UDP_HOST_MAX)
		return RCP_EADDR;
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (!host_ok(host, bracketed, &numeric))
		return RCP_EADDR;

	pl = strlen(port);
	if (!pl) {
		if (!passive)
			return RCP_EADDR;
	} else {
		if (pl > 5 || strspn(port, "0123456789") != pl)
			return RCP_EADDR;
		pv = strtoul(port, NULL, 10);
		if (pv > 65535 || (!passive && !pv))
			return RCP_EADDR;
	}
	snprintf(portstr, sizeof portstr, "%lu", pv);

	memset(&hints, 0, sizeof hints);
	hints.ai_family = bracketed ? AF_INET6 : family;
	hints.ai_socktype = SOCK_DGRAM;
	hints.ai_protocol = IPPROTO_UDP;
	hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc) {
		if (rc == EAI_MEMORY)
			return RCP_ENOMEM;
		if (!numeric)
			rcpi_debug("udp: cannot resolve %s: %s", host, gai_strerror(rc));
		return RCP_EADDR;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof sa->in) {
			pick = ai;
			break;
		}
		if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof sa->in6 && !pick)
			pick = ai;
	}
	if (!pick) {
		freeaddrinfo(res);
		return RCP_EADDR;
	}
	memcpy(sa, pick->ai_addr, pick->ai_family == AF_INET ? sizeof sa->in : sizeof sa->in6);
	freeaddrinfo(res);
	if (!passive && rcpi_udp_sa_is_unspecified(sa))
		return RCP_EADDR;
	return 0;
}

/* ---- MTU and buffer sizing --------------------------------------------- */

/* MTU of the interface holding SELF's address (the smallest up, non-
 * loopback interface for a wildcard address), or 0 if unknown. */
uint32_t rcpi_udp_iface_mtu(int fd, const union udp_sa *self)
{
	struct ifaddrs *list, *i;
	uint32_t best = 0;
	int wild = rcpi_udp_sa_is_unspecified(self);

	if (getifaddrs(&list))
		return 0;
	for (i = list; i; i = i->ifa_next) {
		struct ifreq ifr;
		union udp_sa a;

		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) ||
		    i->ifa_addr->sa_family != self->sa.sa_family)
			continue;
		memcpy(&a, i->ifa_addr, rcpi_udp_sa_len(self));
		if (wild ? (i->ifa_flags & IFF_LOOPBACK) != 0
		         : (self->sa.sa_family == AF_INET
		                ? a.in.sin_addr.s_addr != self->in.sin_addr.s_addr
		                : memcmp(&a.in6.sin6_addr, &self->in6.sin6_addr, 16) != 0))
			continue;
		memset(&ifr, 0, sizeof ifr);
		snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", i->ifa_name);
		if (ioctl(fd, SIOCGIFMTU, &ifr) || ifr.ifr_mtu <= 0)
			continue;
		if (!best || (uint32_t)ifr.ifr_mtu < best)
			best = (uint32_t)ifr.ifr_mtu;
		if (!wild)
			break;
	}
	freeifaddrs(list);
	return best;
}

/* The kernel's charge against the receive buffer for one datagram of LEN
 * bytes (skb truesize).  Model fitted to Linux 6.x loopback: linear skbs
 * from kmalloc power-of-two buckets below 16 KiB, page fragments above.
 * Measured (payload: bytes charged): 8: 832, 1472: 2304, 9000: 16644,
 * 16384: 17332, 65000: 67650; the model is never below those. */
uint64_t rcpi_udp_truesize(uint32_t len)
{
	uint64_t lin = (uint64_t)len + 448, b = 64;

	if (lin <= 16384) {
		while (b < lin)
			b <<= 1;
		return b + 320;
	}
	return (((uint64_t)len + 4095) & ~4095ull) + 2650;
}

/* Sets a socket buffer: the FORCE option first (root may exceed
 * net.core.[rw]mem_max), the plain one if that is refused.  Returns the
 * size the kernel really granted. */
int rcpi_udp_set_buf(int fd, int force, int plain, size_t want)
{
	int v = want > INT_MAX / 2 ? INT_MAX / 2 : (int)want, got = 0;
	socklen_t l = sizeof got;

	if (v > 0 && setsockopt(fd, SOL_SOCKET, force, &v, sizeof v))
		setsockopt(fd, SOL_SOCKET, plain, &v, sizeof v);
	if (getsockopt(fd, SOL_SOCKET, plain, &got, &l))
		got = 0;
	return got;
}

/* A size from the environment; 0 or less: leave the kernel's default. */
size_t rcpi_udp_env_size(const char *name, int64_t def)
{
	int64_t v = rcpi_env_int(name, def);
	return v > 0 ? (size_t)v : 0;
}

/* Warns once per peer when the path to it is narrower than our MTU, which
 * would mean IP fragmentation (or loss where fragments are filtered).  A
 * connected UDP socket sends nothing: connect only looks up the route. */
void rcpi_udp_check_path_mtu(struct udp_nic *u, struct udp_peer *p)
{
	int s, m = 0, hdr = u->family == AF_INET ? 28 : 48;
	socklen_t l = sizeof m;

	if (u->loopback || rcpi_udp_sa_is_loopback(&p->sa) || p->warned)
		return;
	s = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	if (!connect(s, &p->sa.sa, rcpi_udp_sa_len(&p->sa)) &&
	    !getsockopt(s, u->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
	                u->family == AF_INET ? IP_MTU : IPV6_MTU, &m, &l) &&
	    m > hdr && (uint32_t)(m - hdr) < u->mtu) {
		char ip[INET6_ADDRSTRLEN] = "?";
		inet_ntop(u->family,
		          u->family == AF_INET ? (const void *)&p->sa.in.sin_addr
		                               : (const void *)&p->sa.in6.sin6_addr,
		          ip, sizeof ip);
		rcpi_warn("udp: path MTU to %s allows %d-byte frames, mtu is %u: larger "
		          "frames will be fragmented (set RCP_UDP_MTU)",
		          ip, m - hdr, u->mtu);
		p->warned = 1;
	}
	close(s);
}
