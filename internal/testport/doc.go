// Package testport hands tests loopback addresses to bind later: a node
// that must keep its gossip port across a restart, or a process started
// with its ports on the command line, cannot listen on port 0.
//
// The ports are picked below the kernel's ephemeral range, so no
// outgoing connection and no port-0 listener of the many a cluster test
// opens can take one between the pick and the bind (or the restart).
// Within one test process a port is handed out once.
package testport
