#!/usr/bin/env bash
# cluster.sh: the topology of docker-compose.yml as processes on this
# machine's loopback, without Docker.
#
#   scripts/cluster.sh up       build toolnode, start the nodes, wait until each is ready
#   scripts/cluster.sh status   which nodes run; node1's view of the cluster
#   scripts/cluster.sh down     SIGTERM the nodes (the joiners first) and wait for them
#   scripts/cluster.sh clean    down, then remove the state directory
#
# The nodes, as in docker-compose.yml, every one with -voters 3 (an odd
# quorum: the leader keeps three voters and makes the others clients):
#   node1  jq                         bootstraps the cluster
#   node2  jq                         -join node1
#   node3  no jq, no python3          -join node1
#   node4  no jq, no python3, deploy/env/node4.env (SITE=edge), -tool-env SITE
#                                     -join node1, once node1-3 are ready: the client
# A node "without jq" runs with a PATH made of symbolic links to every
# command of the caller's PATH except jq and python: its catalog has no
# json_query, echo or file_* tools.
#
# Clients present the cluster's admin token, which node1 (the bootstrap)
# writes to its data/admin.token: `toolnode 9p -data DIR/node1/data ...`.
#
# Credentials: at the first `up` the script makes, in the state directory's
# secrets/, a gossip key (toolnode keygen) and, with toolnode tls, a CA and a
# certificate per node (the CA's key in ca/). Every node gets the key in its
# environment (TOOLNODE_GOSSIP_KEY: gossip encryption and the cluster
# port's authentication, never on a command line) and its certificate as
# -tls-cert/-tls-key/-tls-ca for the cluster port. `clean` removes them.
#
# Each node has its own directory under the state directory: data/ (-data),
# tools/ (examples/tools plus deploy/tools), agents/, config/ (its
# XDG_CONFIG_HOME: ollie/env is deploy/env/NODE.env when there is one),
# home/, pid and log. The environment of a node is built from scratch: only
# HOME, PATH, XDG_CONFIG_HOME and the caller's USER, LOGNAME, LANG, LC_ALL,
# TZ and TMPDIR.
#
# Environment:
#   TOOLNODE_CLUSTER_DIR   state directory (default ${TMPDIR:-/tmp}/toolnode-cluster)
#   TOOLNODE_9P_PORT       9P port of node1 (default 9564); node N uses it + 10*(N-1)
#   TOOLNODE_GOSSIP_PORT   gossip port of node1 (default 7946), likewise
#   TOOLNODE_CLUSTER_PORT  cluster port of node1 (default 9565), likewise
#   TOOLNODE_METRICS_PORT  -metrics port of node1 (default 9567), likewise: /readyz says
#                          when a node is ready
#   TOOLNODE_GOSSIP_KEY    gossip key (toolnode keygen) instead of the one made at the first up
#   TOOLNODE_START_TIMEOUT seconds `up` waits for a node to be ready (default 60)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${TOOLNODE_CLUSTER_DIR:-${TMPDIR:-/tmp}/toolnode-cluster}
P9_PORT=${TOOLNODE_9P_PORT:-9564}
GOSSIP_PORT=${TOOLNODE_GOSSIP_PORT:-7946}
CLUSTER_PORT=${TOOLNODE_CLUSTER_PORT:-9565}
METRICS_PORT=${TOOLNODE_METRICS_PORT:-9567}
BIN=$DIR/toolnode
NODES="node1 node2 node3 node4"
BOOTSTRAP=node1
VOTERS=3
CLIENTS="node4" # started once the others are ready, so the voters are the others
START_TIMEOUT=${TOOLNODE_START_TIMEOUT:-60} # seconds for a node to be ready
STOP_TIMEOUT=40  # seconds for a node to stop (toolnode gives up after 30)

die() {
	printf 'cluster.sh: %s\n' "$*" >&2
	exit 1
}

# index NODE: 0 for node1, 1 for node2...
index() {
	local i=0 n
	for n in $NODES; do
		[[ $n == "$1" ]] && {
			echo "$i"
			return
		}
		i=$((i + 1))
	done
	die "no node $1"
}

p9_port() { echo $((P9_PORT + 10 * $(index "$1"))); }
gossip_port() { echo $((GOSSIP_PORT + 10 * $(index "$1"))); }
cluster_port() { echo $((CLUSTER_PORT + 10 * $(index "$1"))); }
metrics_port() { echo $((METRICS_PORT + 10 * $(index "$1"))); }

has_jq() {
	case $1 in
	node1 | node2) return 0 ;;
	*) return 1 ;;
	esac
}

# tool_env NODE: the -tool-env of a node, the variables of its env file
# that its tools read (deploy/tools/site.meta reads SITE).
tool_env() {
	case $1 in
	node4) echo SITE ;;
	esac
}

is_client() { [[ " $CLIENTS " == *" $1 "* ]]; }

# running NODE: its pid file names a live toolnode process started from $BIN.
running() {
	local pidfile=$DIR/$1/pid pid args
	[[ -f $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if args=$(ps -o args= -p "$pid" 2>/dev/null); then
		[[ $args == *"$BIN"* ]] || return 1
	fi
}

# ready NODE: its /readyz answers 200 (a leader, and what it committed
# applied): an HTTP GET through bash's /dev/tcp, which needs no token.
ready() {
	local code
	{
		exec 3<>"/dev/tcp/127.0.0.1/$(metrics_port "$1")" &&
			printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
			read -r -t 3 _ code _ <&3
	} 2>/dev/null || return 1
	exec 3<&-
	[[ $code == 200 ]]
}

# token: the bootstrap node's admin token, for a 9P client.
token() { cat "$DIR/$BOOTSTRAP/data/admin.token" 2>/dev/null; }

# port_busy PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_busy() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# nojq_path: a directory of links to the caller's commands minus jq and
# python, so that the variants matching "binary": "jq" or "python3" fail.
nojq_path() {
	local bin=$DIR/path-nojq d f name
	local -a links
	rm -rf "$bin"
	mkdir -p "$bin"
	local IFS=:
	for d in $PATH; do
		[[ $d == /* && -d $d ]] || continue
		links=()
		for f in "$d"/*; do
			name=${f##*/}
			case $name in
			jq | jq-* | python | python[0-9]*) continue ;;
			esac
			[[ -f $f && -x $f && ! -e $bin/$name && ! -L $bin/$name ]] || continue
			links+=("$f")
		done
		if ((${#links[@]} > 0)); then
			ln -s "${links[@]}" "$bin/"
		fi
	done
	if PATH=$bin command -v jq >/dev/null || PATH=$bin command -v python3 >/dev/null; then
		die "$bin still has jq or python3"
	fi
	echo "$bin"
}

prepare() {
	local node=$1 nd=$DIR/$1
	mkdir -p "$nd/data" "$nd/home" "$nd/config/ollie"
	rm -rf "$nd/tools" "$nd/agents"
	mkdir -p "$nd/tools" "$nd/agents"
	cp -p "$ROOT"/examples/tools/* "$ROOT"/deploy/tools/* "$nd/tools/"
	cp -p "$ROOT"/examples/agents/* "$nd/agents/"
	if [[ -f $ROOT/deploy/env/$node.env ]]; then
		cp "$ROOT/deploy/env/$node.env" "$nd/config/ollie/env"
	else
		rm -f "$nd/config/ollie/env"
	fi
}

# secrets: make, once, the gossip key, the CA and each node's certificate.
secrets() {
	local node sd=$DIR/secrets
	mkdir -p "$sd" "$DIR/ca"
	chmod 700 "$sd" "$DIR/ca"
	if [[ ! -s $sd/gossip.key ]]; then
		(umask 077 && "$BIN" keygen >"$sd/gossip.key")
	fi
	if [[ ! -f $DIR/ca/toolnode-ca.pem ]]; then
		"$BIN" tls ca -dir "$DIR/ca" >/dev/null
	fi
	for node in $NODES; do
		if [[ ! -f $sd/$node.pem ]]; then
			"$BIN" tls cert -node "$node" -dir "$sd" -ca "$DIR/ca/toolnode-ca.pem" -ca-key "$DIR/ca/toolnode-ca-key.pem" >/dev/null
		fi
	done
}

start() {
	local node=$1 path=$2 nd=$DIR/$1 v sd=$DIR/secrets
	local -a env args
	env=("HOME=$nd/home" "PATH=$path" "XDG_CONFIG_HOME=$nd/config"
		"TOOLNODE_GOSSIP_KEY=${TOOLNODE_GOSSIP_KEY:-$(<"$sd/gossip.key")}")
	for v in USER LOGNAME LANG LC_ALL TZ TMPDIR; do
		[[ -z ${!v:-} ]] || env+=("$v=${!v}")
	done
	args=(serve -name "$node" -data "$nd/data" -tools "$nd/tools" -agents "$nd/agents"
		-9p "127.0.0.1:$(p9_port "$node")"
		-gossip "127.0.0.1:$(gossip_port "$node")"
		-cluster "127.0.0.1:$(cluster_port "$node")"
		-metrics "127.0.0.1:$(metrics_port "$node")" -voters "$VOTERS")
	if [[ $node != "$BOOTSTRAP" ]]; then
		args+=(-join "127.0.0.1:$(gossip_port "$BOOTSTRAP")")
	fi
	if [[ -n $(tool_env "$node") ]]; then
		args+=(-tool-env "$(tool_env "$node")")
	fi
	args+=(-tls-cert "$sd/$node.pem" -tls-key "$sd/$node-key.pem" -tls-ca "$DIR/ca/toolnode-ca.pem")
	nohup env -i "${env[@]}" "$BIN" "${args[@]}" >"$nd/log" 2>&1 </dev/null &
	echo $! >"$nd/pid"
}

# await NODE...: wait until each node is ready; fail when one exits.
await() {
	local node deadline=$((SECONDS + START_TIMEOUT))
	for node in "$@"; do
		until ready "$node"; do
			if ! running "$node"; then
				printf 'cluster.sh: %s exited; the end of %s:\n' "$node" "$DIR/$node/log" >&2
				tail -n 20 "$DIR/$node/log" >&2 || true
				return 1
			fi
			if ((SECONDS >= deadline)); then
				printf 'cluster.sh: %s is not ready (http://127.0.0.1:%s/readyz) after %ss (log %s)\n' \
					"$node" "$(metrics_port "$node")" "$START_TIMEOUT" "$DIR/$node/log" >&2
				return 1
			fi
			sleep 0.2
		done
	done
}

up() {
	local node port path others=() clients=()
	for node in $NODES; do
		! running "$node" || die "$node is already running (pid $(<"$DIR/$node/pid")): scripts/cluster.sh down first"
	done
	for node in $NODES; do
		for port in "$(p9_port "$node")" "$(gossip_port "$node")" "$(cluster_port "$node")" "$(metrics_port "$node")"; do
			! port_busy "$port" || die "port $port ($node) is in use: set TOOLNODE_9P_PORT, TOOLNODE_GOSSIP_PORT, TOOLNODE_CLUSTER_PORT, TOOLNODE_METRICS_PORT"
		done
	done
	mkdir -p "$DIR"
	echo "building $BIN"
	(cd "$ROOT" && go build -o "$BIN" ./cmd/toolnode)
	secrets
	local nojq
	nojq=$(nojq_path)
	for node in $NODES; do
		prepare "$node"
		if is_client "$node"; then
			clients+=("$node")
		elif [[ $node != "$BOOTSTRAP" ]]; then
			others+=("$node")
		fi
	done
	path_of() { if has_jq "$1"; then echo "$PATH"; else echo "$nojq"; fi; }

	start "$BOOTSTRAP" "$(path_of "$BOOTSTRAP")"
	await "$BOOTSTRAP" || {
		down
		exit 1
	}
	for node in "${others[@]}"; do
		start "$node" "$(path_of "$node")"
	done
	await "${others[@]}" || {
		down
		exit 1
	}
	# The clients join once the voters are ready: the leader gives the
	# voters' places to the nodes it sees first.
	for node in "${clients[@]}"; do
		start "$node" "$(path_of "$node")"
	done
	await "${clients[@]}" || {
		down
		exit 1
	}

	echo
	for node in $NODES; do
		printf '%-6s 9P 127.0.0.1:%-5s gossip 127.0.0.1:%-5s cluster 127.0.0.1:%-5s metrics 127.0.0.1:%-5s %-6s log %s\n' \
			"$node" "$(p9_port "$node")" "$(gossip_port "$node")" "$(cluster_port "$node")" "$(metrics_port "$node")" \
			"$(has_jq "$node" && echo jq || echo no-jq)" "$DIR/$node/log"
	done
	# status and down find this cluster by the same variables: the hint
	# carries those that were set, or it would show another cluster.
	local again=scripts/cluster.sh v
	for v in TOOLNODE_METRICS_PORT TOOLNODE_CLUSTER_PORT TOOLNODE_GOSSIP_PORT TOOLNODE_9P_PORT TOOLNODE_CLUSTER_DIR; do
		[[ -z ${!v:-} ]] || again="$v=${!v} $again"
	done
	cat <<-MSG

		  export TOOLNODE_TOKEN=\$(cat $DIR/$BOOTSTRAP/data/admin.token)
		  $BIN 9p 127.0.0.1:$(p9_port "$BOOTSTRAP") read cluster/members
		  $BIN 9p 127.0.0.1:$(p9_port node3) read t/idx
		  $BIN call -a 127.0.0.1:$(p9_port node4) site '{}'
		  $again status
		  $again down
	MSG
}

# stop NODE...: SIGTERM them, then wait; SIGKILL what is left after STOP_TIMEOUT.
stop() {
	local node deadline=$((SECONDS + STOP_TIMEOUT)) left
	local -a sent=()
	for node in "$@"; do
		if running "$node"; then
			kill -TERM "$(<"$DIR/$node/pid")" 2>/dev/null || true
			sent+=("$node")
		fi
	done
	while :; do
		left=()
		for node in "${sent[@]+"${sent[@]}"}"; do
			! running "$node" || left+=("$node")
		done
		((${#left[@]} > 0)) || break
		if ((SECONDS >= deadline)); then
			printf 'cluster.sh: %s still running after %ss: SIGKILL\n' "${left[*]}" "$STOP_TIMEOUT" >&2
			for node in "${left[@]}"; do
				kill -KILL "$(<"$DIR/$node/pid")" 2>/dev/null || true
			done
			break
		fi
		sleep 0.2
	done
	for node in "${sent[@]+"${sent[@]}"}"; do
		echo "stopped $node"
	done
	for node in "$@"; do
		rm -f "$DIR/$node/pid"
	done
}

down() {
	local node others=() clients=()
	for node in $NODES; do
		if is_client "$node"; then
			clients+=("$node")
		elif [[ $node != "$BOOTSTRAP" ]]; then
			others+=("$node")
		fi
	done
	# The clients, then the other joiners leave first, so the bootstrap
	# node sees them go.
	stop "${clients[@]}"
	stop "${others[@]}"
	stop "$BOOTSTRAP"
}

status() {
	local node bad=0
	for node in $NODES; do
		if ! running "$node"; then
			printf '%-6s stopped\n' "$node"
			bad=1
		elif ready "$node"; then
			printf '%-6s ready, pid %s, 9P 127.0.0.1:%s\n' "$node" "$(<"$DIR/$node/pid")" "$(p9_port "$node")"
		else
			printf '%-6s running, pid %s, but not ready (http://127.0.0.1:%s/readyz)\n' "$node" "$(<"$DIR/$node/pid")" "$(metrics_port "$node")"
			bad=1
		fi
	done
	if [[ -x $BIN ]] && ready "$BOOTSTRAP"; then
		printf '\ncluster/members of %s:\n' "$BOOTSTRAP"
		TOOLNODE_TOKEN=${TOOLNODE_TOKEN:-$(token)} "$BIN" 9p "127.0.0.1:$(p9_port "$BOOTSTRAP")" read cluster/members || bad=1
	fi
	return "$bad"
}

clean() {
	down
	[[ -d $DIR ]] || return 0
	# Only a directory this script made: it has node1/ or the binary.
	[[ -d $DIR/$BOOTSTRAP || -x $BIN ]] || die "$DIR does not look like a cluster.sh state directory: not removed"
	rm -rf "$DIR"
	echo "removed $DIR"
}

case ${1:-} in
up | down | status | clean) "$1" ;;
*)
	echo "usage: scripts/cluster.sh up|down|status|clean" >&2
	exit 2
	;;
esac
