#!/usr/bin/env bash
# Sundial's secured local Redis Cluster: cluster.sh's three masters with a
# replica each, but with TLS on client, cluster bus and replication links and
# the sundial ACL user (default user off), in a folder and on ports of their
# own, so that it runs beside the plain cluster.
#
#   secure-cluster.sh up|down|status|kill|start|logs|reset   as cluster.sh, Redis only
#   secure-cluster.sh env   SUNDIAL_SECURE_REDIS_CLUSTER_ADDRS and the TLS and secrets folders
#
# Settings: SUNDIAL_SECURE_CLUSTER_DIR (default: <stack dir>/secure-cluster),
# SUNDIAL_SECURE_REDIS_CLUSTER_PORT (25101, and the next five),
# SUNDIAL_SECURE_REDIS_CLUSTER_BUS_PORT (25151, and the next five). The
# certificates come from deploy/local/certs, the password is made once.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../.." && pwd -P)

case ${1-} in
  -h | --help | help | '')
    sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    [[ -n ${1-} ]] || exit 2
    exit 0
    ;;
esac

base=$(realpath -m "${SUNDIAL_STACK_DIR:-$REPO/.stack}")
export SUNDIAL_CLUSTER_SECURE=true
export SUNDIAL_STACK_DIST_DIR=${SUNDIAL_STACK_DIST_DIR:-$base/dist}
export SUNDIAL_CLUSTER_DIR=${SUNDIAL_SECURE_CLUSTER_DIR:-$base/secure-cluster}
export SUNDIAL_REDIS_CLUSTER_PORT=${SUNDIAL_SECURE_REDIS_CLUSTER_PORT:-25101}
export SUNDIAL_REDIS_CLUSTER_BUS_PORT=${SUNDIAL_SECURE_REDIS_CLUSTER_BUS_PORT:-25151}
exec "$HERE/cluster.sh" "$@"
