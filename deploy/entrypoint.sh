#!/bin/sh
# Entrypoint of the toolnode image.
#
#   toolnode-entrypoint secrets NODE...   the compose file's init step: make,
#       once, what a cluster needs. In $TOOLNODE_CA_DIR (default
#       /etc/toolnode/ca), which only this step mounts: the CA
#       (toolnode tls ca) and the gossip key gossip.key (toolnode keygen).
#       In $TOOLNODE_SECRETS/NODE (default /etc/toolnode/secrets/NODE) for
#       each NODE, a directory that NODE alone mounts: a copy of gossip.key
#       and of the CA's certificate toolnode-ca.pem, and NODE.pem /
#       NODE-key.pem (toolnode tls cert). Files that exist are kept, so a
#       restart changes nothing. With $TOOLNODE_SECRETS_OWNER (USER:GROUP)
#       set, each NODE directory and its files are handed to that owner.
#   toolnode-entrypoint health [PATH]     the image's health check: an HTTP
#       GET of PATH (default /readyz) on the node's -metrics listener,
#       $TOOLNODE_HEALTH_ADDR (default 127.0.0.1:9567); healthy on a 200.
#       It needs no token: /healthz and /readyz are open.
#   toolnode-entrypoint [serve] ARGS...   runs `toolnode serve ARGS`, plus
#       -advertise "$HOSTNAME"            when ARGS have no -advertise (a node
#                                         bound to 0.0.0.0 needs one);
#       the gossip key                    $TOOLNODE_GOSSIP_KEY, else the
#                                         secrets' gossip.key, passed in the
#                                         environment (never on the command
#                                         line, which ps shows);
#       -tls-cert/-tls-key/-tls-ca and    when $TOOLNODE_SECRETS holds NAME.pem
#       -9p-tls-cert/-9p-tls-key          for the node's -name (default
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
	if [ ! -s "$cadir/gossip.key" ]; then
		toolnode keygen >"$cadir/gossip.key.tmp"
		mv "$cadir/gossip.key.tmp" "$cadir/gossip.key"
	fi
	if [ ! -f "$cadir/toolnode-ca.pem" ]; then
		toolnode tls ca -dir "$cadir"
	fi
	for node in "$@"; do
		case $node in
		'' | . | .. | */*) echo "secrets: $node is not a node name" >&2 && exit 2 ;;
		esac
		dir=$secrets/$node
		mkdir -p "$dir"
		chmod 700 "$dir"
		if [ ! -s "$dir/gossip.key" ]; then
			cp "$cadir/gossip.key" "$dir/gossip.key.tmp"
			mv "$dir/gossip.key.tmp" "$dir/gossip.key"
		fi
		[ -f "$dir/toolnode-ca.pem" ] || cp "$cadir/toolnode-ca.pem" "$dir/toolnode-ca.pem"
		if [ ! -f "$dir/$node.pem" ] || [ ! -f "$dir/$node-key.pem" ]; then
			toolnode tls cert -node "$node" -dir "$dir" \
				-ca "$cadir/toolnode-ca.pem" -ca-key "$cadir/toolnode-ca-key.pem"
		fi
		if [ -n "${TOOLNODE_SECRETS_OWNER:-}" ]; then
			chown -R "$TOOLNODE_SECRETS_OWNER" "$dir"
		fi
	done
	exit 0
	;;
health)
	shift
	# bash, for its /dev/tcp: the image has no HTTP client. The body says
	# why a node is not ready; it goes to the health check's log.
	exec bash -c '
		addr=$1 path=$2
		if ! exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}"; then
			echo "health: nothing answers on $addr (does the node run with -metrics $addr?)" >&2
			exit 1
		fi
		printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$path" "$addr" >&3
		if ! read -r -t 3 _ code _ <&3; then
			echo "health: $addr did not answer $path" >&2
			exit 1
		fi
		while read -r -t 3 line <&3 && [ ${#line} -gt 1 ]; do :; done
		printf "%s: %s %s\n" "$addr" "$path" "$code"
		head -c 4096 <&3
		[ "$code" = 200 ]
	' health "${TOOLNODE_HEALTH_ADDR:-127.0.0.1:9567}" "${1:-/readyz}"
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
