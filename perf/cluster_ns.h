/*
 * perf/cluster_ns.h — the naming of an rcp-cluster's hosts (tools/rcp-cluster)
 * for the perf tools that run between two of them (rcp-nic-pingpong and
 * rcp-xdp-pingpong --cluster NAME), in one place so the tools and the
 * cluster script cannot drift apart: host N of cluster NAME is the network
 * namespace rcpc-NAME-hN, its interface eth0, its address 198.18.0.N.
 */
#ifndef RCP_PERF_CLUSTER_NS_H
#define RCP_PERF_CLUSTER_NS_H

#include <stdio.h>

#include "common/sh.h"

/* The namespace of host HOST (1-based) of cluster NAME into BUF. */
static void rcpi_cluster_ns(char *buf, size_t n, const char *name, int host)
    __attribute__((unused));
static void rcpi_cluster_ns(char *buf, size_t n, const char *name, int host)
{
	snprintf(buf, n, "rcpc-%.8s-h%d", name, host);
}

/* Moves the calling thread into host HOST of cluster NAME: 0, or -1 with
 * errno (no such cluster or host, or no right to enter it). */
static int rcpi_cluster_enter(const char *name, int host) __attribute__((unused));
static int rcpi_cluster_enter(const char *name, int host)
{
	char ns[64];

	rcpi_cluster_ns(ns, sizeof ns, name, host);
	return rcpi_netns_enter(ns);
}

#endif
