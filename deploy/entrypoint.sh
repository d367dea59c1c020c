#!/bin/sh
# Entrypoint of the toolnode image.
#
#   toolnode-entrypoint secrets NODE...   the compose file's init step: make,
#       once, what a cluster needs in $TOOLNODE_SECRETS (default
#       /etc/toolnode/secrets): gossip.key (toolnode keygen), the CA's
#       certificate toolnode-ca.pem, and NODE.pem / NODE-key.pem for each
#       NODE (toolnode tls cert). The CA's key stays in $TOOLNODE_CA_DIR
#       (default /etc/toolnode/ca), which only this step mounts. Files that
#       exist are kept, so a restart changes nothing.
#   toolnode-entrypoint health            the image's health check: reads
#       the node file over 9P (TLS with $TOOLNODE_CA, the node's admin token
#       from $TOOLNODE_DATA/admin.token when there is one). A node that
#       joined holds no admin token: without $TOOLNODE_TOKEN it is healthy
#       when its 9P port answers an attach, refusing it for want of a token.
#   toolnode-entrypoint [serve] ARGS...   runs `toolnode serve ARGS`, plus
#       -advertise "$HOSTNAME"            when ARGS have no -advertise (a node
#                                         bound to 0.0.0.0 needs one);
#       the gossip key                    $TOOLNODE_GOSSIP_KEY, else the
#                                         secrets' gossip.key, passed in the
#                                         environment (never on the command
#                                         line, which ps shows);
#       -tls-cert/-tls-key/-tls-ca and    when the secrets hold NAME.pem for
#       -9p-tls-cert/-9p-tls-key          the node's -name (default
#                                         $HOSTNAME) and ARGS give no -tls-cert;
#       -join "$TOOLNODE_JOIN"            when TOOLNODE_JOIN is set, unless
#                                         POD_NAME is TOOLNODE_BOOTSTRAP_POD
#                                         (Kubernetes: the pod that starts the
#                                         cluster).
# Arguments that start with another subcommand (9p, call, keygen, tls) run
# it as is.
set -eu

secrets=${TOOLNODE_SECRETS:-/etc/toolnode/secrets}
cadir=${TOOLNODE_CA_DIR:-/etc/toolnode/ca}

case ${1:-serve} in
secrets)
	shift
	umask 077
	mkdir -p "$secrets" "$cadir"
	if [ ! -s "$secrets/gossip.key" ]; then
		toolnode keygen >"$secrets/gossip.key.tmp"
		mv "$secrets/gossip.key.tmp" "$secrets/gossip.key"
	fi
	if [ ! -f "$cadir/toolnode-ca.pem" ]; then
		toolnode tls ca -dir "$cadir"
	fi
	[ -f "$secrets/toolnode-ca.pem" ] || cp "$cadir/toolnode-ca.pem" "$secrets/toolnode-ca.pem"
	for node in "$@"; do
		if [ ! -f "$secrets/$node.pem" ]; then
			toolnode tls cert -node "$node" -dir "$secrets" \
				-ca "$cadir/toolnode-ca.pem" -ca-key "$cadir/toolnode-ca-key.pem"
		fi
	done
	exit 0
	;;
health)
	shift
	if [ -z "${TOOLNODE_TOKEN:-}" ] && [ -r "${TOOLNODE_DATA:-/var/lib/toolnode}/admin.token" ]; then
		TOOLNODE_TOKEN=$(cat "${TOOLNODE_DATA:-/var/lib/toolnode}/admin.token")
		export TOOLNODE_TOKEN
	fi
	if [ -n "${TOOLNODE_TOKEN:-}" ]; then
		exec toolnode 9p read node
	fi
	out=$(toolnode 9p read node 2>&1) && exit 0
	case $out in
	*"without a token is refused"*) exit 0 ;;
	esac
	printf '%s\n' "$out" >&2
	exit 1
	;;
-*) set -- serve "$@" ;;
serve) ;;
*) exec toolnode "$@" ;;
esac
[ $# -gt 0 ] || set -- serve

advertise= name= tls= prev=
for a in "$@"; do
	case $a in
	-advertise | --advertise | -advertise=* | --advertise=*) advertise=1 ;;
	-tls-cert | --tls-cert | -tls-cert=* | --tls-cert=*) tls=1 ;;
	-name=* | --name=*) name=${a#*=} ;;
	esac
	case $prev in
	-name | --name) name=$a ;;
	esac
	prev=$a
done
# shellcheck disable=SC3028 # not POSIX, but Docker sets it
host=${HOSTNAME:-$(hostname)}
if [ -z "$advertise" ]; then
	set -- "$@" -advertise "$host"
fi
[ -n "$name" ] || name=$host
if [ -z "${TOOLNODE_GOSSIP_KEY:-}" ] && [ -s "$secrets/gossip.key" ]; then
	TOOLNODE_GOSSIP_KEY=$(cat "$secrets/gossip.key")
fi
# Kubernetes (deploy/kubernetes): every pod joins $TOOLNODE_JOIN but the one
# named $TOOLNODE_BOOTSTRAP_POD, which starts the cluster on its first start.
if [ -n "${TOOLNODE_JOIN:-}" ] && [ "${POD_NAME:-}" != "${TOOLNODE_BOOTSTRAP_POD:-}" ]; then
	set -- "$@" -join "$TOOLNODE_JOIN"
fi
if [ -n "${TOOLNODE_GOSSIP_KEY:-}" ]; then
	export TOOLNODE_GOSSIP_KEY
else
	unset TOOLNODE_GOSSIP_KEY
fi
if [ -z "$tls" ] && [ -f "$secrets/$name.pem" ]; then
	set -- "$@" -tls-cert "$secrets/$name.pem" -tls-key "$secrets/$name-key.pem" \
		-tls-ca "$secrets/toolnode-ca.pem" \
		-9p-tls-cert "$secrets/$name.pem" -9p-tls-key "$secrets/$name-key.pem"
fi
exec toolnode "$@"
