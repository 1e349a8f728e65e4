/* placeholder */
#include "nic/nic_int.h"
int rcpi_nic_faults_wrap(rcp_nic *inner, const char *spec, rcp_nic **out) { (void)inner; (void)spec; (void)out; return RCP_ENOTSUP; }
