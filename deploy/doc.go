// Package deploy holds what the container images of toolnode need beyond
// the Go sources: the image's entrypoint (entrypoint.sh: the secrets init
// step, the health check, serve), per-host environment files (env/), tools
// whose variants depend on the host (tools/), the Kubernetes manifests
// (kubernetes/) and a systemd unit (systemd/). The multi-host topology
// itself is docker-compose.yml and the Dockerfile at the top of the
// repository, and scripts/cluster.sh runs the same topology as local
// processes; README.md here says how to use them.
//
// The package has no code. Its tests load docker-compose.yml offline with
// compose-go and check the promises of the topology (services, published
// ports, joins, an odd number of voters and a client, waits for health
// that cannot deadlock, a health check that needs no token, each node
// mounting only its own key, -tool-env), the Dockerfile, and the
// Kubernetes manifests decoded into k8s.io/api types (stable names, claims,
// an odd quorum); they run the entrypoint with the real binary (its
// secrets step, its health check against real nodes) and the site tool on
// a real node.
package deploy
