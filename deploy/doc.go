// Package deploy holds what the container images of toolnode need beyond
// the Go sources: the image's entrypoint (entrypoint.sh), per-host
// environment files (env/) and tools whose variants depend on the host
// (tools/). The multi-host topology itself is docker-compose.yml and the
// Dockerfile at the top of the repository, and scripts/cluster.sh runs the
// same topology as local processes; README.md here says how to use them.
//
// The package has no code: its test loads docker-compose.yml offline with
// compose-go and checks the topology (services, published ports, joins,
// volumes, the capabilities the build arguments give each image), the
// Dockerfile, and the entrypoint's handling of the gossip key.
package deploy
