#!/usr/bin/env bash
# conformance.sh: the official MCP conformance suite against a node's -mcp.
#
#   scripts/conformance.sh [SCENARIO...]
#
# Builds toolnode, starts a lone node on loopback whose tools and agents
# directories are examples/conformance (the suite's tool fixtures and the
# profile `conformance` that autoloads them), and runs
# @modelcontextprotocol/conformance 0.1.16 (installed from npm into the
# state directory with the npm package node@22, which the suite needs) `server --url http://127.0.0.1:PORT/?profile=conformance` for each
# scenario (default: the tool, progress and logging ones, and the
# session's basics). The suite sends no token, so the node runs with
# -9p-anon call, on loopback only. Prints one line per scenario and exits
# non-zero if any failed. The node's log and the suite's output are kept
# in the state directory.
#
# Environment:
#   TOOLNODE_CONFORMANCE_DIR   state directory (default: a new temporary one)
#   TOOLNODE_CONFORMANCE_PORT  the MCP port (default 9596; 9P, gossip and
#                              cluster use the three after it)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dir=${TOOLNODE_CONFORMANCE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/toolnode-conformance.XXXXXX")}
port=${TOOLNODE_CONFORMANCE_PORT:-9596}
suite=@modelcontextprotocol/conformance@0.1.16
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
	scenarios=(server-initialize ping logging-set-level tools-list tools-call-simple-text
		tools-call-error tools-call-with-progress tools-call-with-logging prompts-list
		server-sse-multiple-streams dns-rebinding-protection)
fi

mkdir -p "$dir/data" "$dir/config"
(cd "$here" && go build -o "$dir/toolnode" ./cmd/toolnode)
XDG_CONFIG_HOME="$dir/config" "$dir/toolnode" serve -name conformance -data "$dir/data" \
	-tools "$here/examples/conformance/tools" -agents "$here/examples/conformance/agents" \
	-mcp "127.0.0.1:$port" -9p "127.0.0.1:$((port + 1))" -gossip "127.0.0.1:$((port + 2))" \
	-cluster "127.0.0.1:$((port + 3))" -9p-anon call >"$dir/node.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 300); do
	grep -q "serving MCP" "$dir/node.log" && grep -q "test_tool_with_logging" "$dir/node.log" && break
	kill -0 $pid 2>/dev/null || { cat "$dir/node.log"; exit 1; }
	sleep 0.1
done
sleep 0.5

npm install --silent --no-audit --no-fund --prefix "$dir/suite" "$suite" node@22 >"$dir/npm.log" 2>&1 ||
	{ cat "$dir/npm.log"; exit 1; }
node22=$dir/suite/node_modules/.bin/node
cli=$dir/suite/node_modules/@modelcontextprotocol/conformance/dist/index.js

failed=0
for s in "${scenarios[@]}"; do
	if "$node22" "$cli" server --url "http://127.0.0.1:$port/?profile=conformance" --scenario "$s" >"$dir/$s.out" 2>&1; then
		echo "pass  $s"
	else
		echo "FAIL  $s  (see $dir/$s.out)"
		failed=1
	fi
done
echo "state: $dir"
exit $failed
