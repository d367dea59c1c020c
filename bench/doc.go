// Package bench holds toolnode's cluster benchmarks: real node processes
// (the toolnode binary, built once per test binary) on loopback, driven
// over 9P by an independent client (9fans.net/go/plan9/client), beside a
// three-member etcd cluster on the same machine as the baseline.
//
//   - BenchmarkClusterWrites: tool_load/tool_unload writes per second
//     through agent ctl files on a three-node cluster with 1, 16 and 64
//     concurrent clients, each with its own 9P connection and agent,
//     spread round-robin over the nodes starting at the leader; and the
//     same number of puts/deletes per second through etcd's v3 JSON
//     gateway, spread over its members the same way; and one client
//     alone on a follower. Every write is one acknowledged, fsync'd Raft
//     commit on both sides.
//   - BenchmarkFollowerWrites: writes through a follower against the
//     same through the leader and through an etcd follower, 1 and 16
//     clients, each leg in turn (follower_bench_test.go); agent/new
//     reports the mean time of each of its 9P steps, every leg its
//     cluster's CPU per write.
//     BenchmarkFollowerWritesInterleaved: the same with the legs
//     interleaved in a new order each iteration, so that they see the
//     same load: write by write for one client, burst by burst for 16;
//     with TOOLNODE_BENCH_BASELINE a cluster of another binary beside
//     them; every leg reports its cluster's CPU and thread wake-ups per
//     write, every ratio also as a median of paired iterations, an
//     agent/new leg the client's time in each of its 9P steps, and the
//     follower's extra time per write over the leader's as a median of
//     paired differences; its hop legs time one 9P round trip to a node
//     idle for 2 ms and to one that just answered (the forward's two
//     hops). The clusters compared are alike: three servers each, no
//     client node, no watcher, etcd at its defaults.
//     BenchmarkWriteVisible: a write on the leader until the events
//     file of another server and of a client show it.
//   - BenchmarkFailover: SIGKILL the leader of a three-node cluster and
//     time the first write a survivor accepts.
//   - BenchmarkJoinToVoter: start a third node with -join beside a
//     two-node cluster and time until the leader lists it as a voter.
//   - BenchmarkStart, BenchmarkCall, BenchmarkWalkRead,
//     BenchmarkReadOpenFid: one node process as a user sees it, each
//     beside its floor in the same run (single_bench_test.go): a process
//     that parses the same 10,000 .meta files, an exec of the same
//     script, go9p's own server with a static file in a process of its
//     own (the floor programs are in internal/). BenchmarkCall/interleaved
//     runs the floor and the call in turn in every iteration, and, with
//     TOOLNODE_BENCH_BASELINE naming another toolnode binary, the same
//     call on a node of that binary: before and after in one run. With
//     TOOLNODE_BENCH_CALL_CLIENT=1 it and BenchmarkCallSteps call through
//     a client (a node out of Raft, fed by its server's stream) of a
//     cluster of two instead of a lone node.
//   - BenchmarkMCPCall, BenchmarkMCPFloor: one tools/call through MCP
//     (`toolnode mcp` over stdio, the node's -mcp over Streamable HTTP)
//     against the same request over 9P, the legs interleaved in one loop
//     and reported as medians and median differences
//     (mcp_bench_test.go); the floor is the SDK's own server with a tool
//     that does nothing (internal/mcpecho) against one 9P round trip to
//     go9p's server; BenchmarkMCPAllocs is what one call allocates in
//     the SDK.
//   - BenchmarkScale: N node processes (5 servers, the rest clients)
//     formed from one start, then idle: formation time, each node's CPU
//     until formed, idle CPU and wake-ups per second of the leader, a
//     server and a client, RSS (scale_bench_test.go); legs for an older
//     binary (TOOLNODE_BENCH_BASELINE), every node a server, and two
//     floors (internal/gossipfloor): memberlist alone at the node's
//     settings, and a Go process that does nothing; env=K=V runs the
//     clients leg with a runtime setting in the nodes' environment.
//
// The nodes run a copy of the binary the linker wrote, as a baseline
// binary is a copy: on this machine the linker's own file, run by a
// hundred processes, mapped 2-3 MiB more in each and idled ~30 % dearer
// than a copy of it (BENCHMARKS.md, "Measuring").
//
// The package has no code outside its tests and the floor programs; "go test ./bench/" without
// -bench runs only quick unit tests of the helpers. The etcd baseline
// needs an etcd binary in $PATH (Debian: apt-get install etcd-server) and
// is skipped, saying so, without one. See BENCHMARKS.md for the command
// and the figures.
package bench
