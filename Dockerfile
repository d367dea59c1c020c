# One toolnode node per container.
#
#   docker build -t toolnode:jq --build-arg WITH_JQ=1 .
#   docker build -t toolnode:plain .
#
# Build arguments:
#   GO_VERSION  tag of the golang image that builds the binary (a Go 1.26 release)
#   WITH_JQ     1 installs jq in the runtime image; any other value leaves it
#               out. python3 is in neither image, so the example tools that
#               need jq or python3 (json_query, echo, file_*) are in the
#               catalog only of a node whose image was built with WITH_JQ=1.
#
# The sandbox is Landlock: it needs no privilege and no capability, but the
# container's seccomp profile must allow the landlock_create_ruleset,
# landlock_add_rule and landlock_restrict_self system calls. Docker's default
# profile allows them since Docker 24; on an older engine, give the container
# a profile that does (a node that cannot sandbox refuses to run tools, and
# says why, unless it runs with -yolo).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/toolnode ./cmd/toolnode

FROM debian:bookworm-slim
ARG WITH_JQ=0
RUN set -eu; \
	if [ "$WITH_JQ" = 1 ]; then \
		apt-get update; \
		apt-get install -y --no-install-recommends jq; \
		rm -rf /var/lib/apt/lists/*; \
		command -v jq; \
	elif command -v jq; then \
		echo "WITH_JQ=$WITH_JQ but the base image has jq" >&2; exit 1; \
	fi; \
	if command -v python3; then \
		echo "python3 must be absent: the tools would find it instead of jq" >&2; exit 1; \
	fi; \
	useradd --system --uid 10001 --user-group --create-home --home-dir /home/toolnode --shell /usr/sbin/nologin toolnode; \
	install -d -o toolnode -g toolnode -m 0750 /var/lib/toolnode; \
	install -d -o toolnode -g toolnode -m 0700 /etc/toolnode/secrets /etc/toolnode/ca

COPY --from=build /out/toolnode /usr/local/bin/toolnode
COPY deploy/entrypoint.sh /usr/local/bin/toolnode-entrypoint
# The example tools and profiles, plus deploy/tools (tools whose variants
# depend on the host, e.g. on SITE): watched and published by the
# node, read-only for it.
COPY examples/tools/ /opt/toolnode/tools/
COPY deploy/tools/ /opt/toolnode/tools/
COPY examples/agents/ /opt/toolnode/agents/

USER toolnode
WORKDIR /home/toolnode
# Raft log and snapshots, published executables, scratch dirs.
VOLUME ["/var/lib/toolnode"]
# 9P, Raft and node-to-node, gossip (TCP and UDP).
EXPOSE 9564/tcp 9565/tcp 7946/tcp 7946/udp

# Healthy when the node is ready: GET /readyz on -metrics 127.0.0.1:9567,
# which answers without a token (deploy/entrypoint.sh).
HEALTHCHECK --interval=5s --timeout=4s --start-period=30s --retries=6 \
	CMD ["toolnode-entrypoint", "health", "/readyz"]

# The entrypoint passes the gossip key ($TOOLNODE_GOSSIP_KEY, else
# /etc/toolnode/secrets/gossip.key) in the environment, adds the node's
# certificates from /etc/toolnode/secrets when they are there, and
# -advertise "$(hostname)" when no -advertise is given; `secrets NODE...`
# makes the key and a directory of certificates per node
# (deploy/entrypoint.sh). Without them a node listening on 0.0.0.0 refuses
# to start and names the flag it lacks: mount the node's own directory from
# the secrets step at /etc/toolnode/secrets (as docker-compose.yml does), or
# give your own key and certificates.
ENTRYPOINT ["toolnode-entrypoint"]
CMD ["serve", "-data", "/var/lib/toolnode", "-tools", "/opt/toolnode/tools", "-agents", "/opt/toolnode/agents", "-9p", "0.0.0.0:9564", "-gossip", "0.0.0.0:7946", "-cluster", "0.0.0.0:9565", "-metrics", "127.0.0.1:9567"]
