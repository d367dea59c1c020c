#!/bin/sh
# Entrypoint of the toolnode image: runs `toolnode serve` with the arguments
# given (the image's CMD, or a compose service's command), plus
#   -encrypt "$TOOLNODE_GOSSIP_KEY"  when TOOLNODE_GOSSIP_KEY is set and non-empty
#                                    (docker-compose.yml passes it, empty by
#                                    default: then gossip is not encrypted);
#   -advertise "$HOSTNAME"           when the arguments have no -advertise
#                                    (a node bound to 0.0.0.0 needs one; Docker
#                                    sets HOSTNAME in every container).
#   -join "$TOOLNODE_JOIN"           when TOOLNODE_JOIN is set, unless POD_NAME is
#                                    TOOLNODE_BOOTSTRAP_POD (Kubernetes: the pod
#                                    that bootstraps the cluster);
# Arguments that start with another subcommand (9p, call, keygen) run it as is.
set -eu

case ${1:-serve} in
-*) set -- serve "$@" ;;
serve) ;;
*) exec toolnode "$@" ;;
esac
[ $# -gt 0 ] || set -- serve

advertise=
for a in "$@"; do
	case $a in
	-advertise | --advertise | -advertise=* | --advertise=*) advertise=1 ;;
	esac
done
if [ -z "$advertise" ]; then
	# shellcheck disable=SC3028 # not POSIX, but Docker sets it
	set -- "$@" -advertise "${HOSTNAME:-$(hostname)}"
fi
# Kubernetes (deploy/kubernetes): every pod joins $TOOLNODE_JOIN but the one
# named $TOOLNODE_BOOTSTRAP_POD, which starts the cluster on its first start.
if [ -n "${TOOLNODE_JOIN:-}" ] && [ "${POD_NAME:-}" != "${TOOLNODE_BOOTSTRAP_POD:-}" ]; then
	set -- "$@" -join "$TOOLNODE_JOIN"
fi
if [ -n "${TOOLNODE_GOSSIP_KEY:-}" ]; then
	set -- "$@" -encrypt "$TOOLNODE_GOSSIP_KEY"
fi
exec toolnode "$@"
