/*
 * nic/verbs/umad.h — the InfiniBand subnet through libibumad.
 *
 * What the subnet manager knows and the verbs library does not say
 * directly: the port as the SM configured it (state, LID, the SM's LID,
 * GID prefix and port GUID), path records between two GIDs, and
 * multicast group membership, asked of the subnet administrator (SA) as
 * MADs on QP1.  Internal API: the backend's multicast and the tests
 * (tests/test_verbs_umad.c, against ibsim + opensm) use it.
 */
#ifndef RCP_NIC_VERBS_UMAD_H
#define RCP_NIC_VERBS_UMAD_H

#include <stdint.h>

#include <infiniband/umad.h>

struct rcpi_umad_port {
	char ca[UMAD_CA_NAME_LEN];
	int port;
	unsigned state; /* 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE */
	unsigned phys_state;
	uint16_t lid, sm_lid;
	uint8_t lmc, sm_sl;
	uint8_t gid[16]; /* prefix + port GUID: GID index 0 */
	uint16_t pkey;   /* P_Key at index 0 */
	int is_ib;       /* link layer InfiniBand (not Ethernet) */
};

/* The port (CA NULL: the first CA; PORT 0: its first port).  Returns 0,
 * RCP_ENODEV (no such CA/port, or no umad devices), RCP_EINVAL. */
int rcpi_umad_port_query(const char *ca, int port, struct rcpi_umad_port *out);

/* A MAD agent of the SA class on one port. */
struct rcpi_umad_sa;
/* Returns 0, RCP_ENODEV, RCP_EPERM (no access to /dev/infiniband/umad*),
 * RCP_ESYS, RCP_ENOMEM. */
int rcpi_umad_sa_open(const char *ca, int port, struct rcpi_umad_sa **out);
void rcpi_umad_sa_close(struct rcpi_umad_sa *sa);

struct rcpi_umad_path {
	uint8_t dgid[16], sgid[16];
	uint16_t dlid, slid, pkey;
	uint8_t sl, mtu, rate, hop_limit, tclass; /* mtu, rate: IB enums */
	uint32_t flow_label;
};

/* The SA's path record from our port to DGID.  Returns 0, RCP_ENOENT (the
 * SA knows no path), RCP_ETIMEDOUT (no answer within TIMEOUT_MS, with
 * retries), RCP_EPROTO (malformed answer), RCP_ESYS. */
int rcpi_umad_path_query(struct rcpi_umad_sa *sa, const uint8_t dgid[16],
                         struct rcpi_umad_path *out, int timeout_ms);

struct rcpi_umad_mcgroup {
	uint8_t mgid[16];
	uint16_t mlid, pkey;
	uint32_t qkey;
	uint8_t mtu, rate, sl;
};

/* Joins our port to multicast group MGID as a full member, creating the
 * group (with QKEY) if it does not exist; OUT gets the MLID to attach a
 * QP to.  Returns 0, RCP_EPERM (the SA refused: bad parameters, MGID in
 * use with another Q_Key, ...), RCP_ETIMEDOUT, RCP_EPROTO, RCP_ESYS. */
int rcpi_umad_mc_join(struct rcpi_umad_sa *sa, const uint8_t mgid[16], uint32_t qkey,
                      struct rcpi_umad_mcgroup *out, int timeout_ms);
/* Leaves MGID.  Returns 0, RCP_ENOENT (not a member), RCP_ETIMEDOUT,
 * RCP_EPROTO, RCP_ESYS. */
int rcpi_umad_mc_leave(struct rcpi_umad_sa *sa, const uint8_t mgid[16], int timeout_ms);

#endif
