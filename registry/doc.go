// Package registry is the tool domain of toolnode: everything about a tool
// that can be decided on one host, without asking the cluster.
//
// It owns:
//
//   - tool and profile names (ValidName);
//   - the .meta format: parsing, defaults, validation of the args JSON
//     Schema, legacy fields (ParseMeta, Meta, Variant, Match);
//   - variant resolution against the local host (Host, Resolver,
//     Meta.Resolve);
//   - reading a tools or agents directory and watching it for changes
//     (ScanTools, ScanProfiles, ParseProfile, WatchDir);
//   - command resolution and execution: argument validation, the process
//     group, timeout, output cap, exit status and stderr tail (Runner);
//   - holding a call's processes: a cgroup per call (cgroup.kill, pids.max),
//     reused by a later call once empty, or, without one, the node as
//     child subreaper sweeping its orphans; the list of protections in
//     force (Runner.Protections);
//   - the Landlock sandbox, applied to a dedicated thread of the node that
//     starts the tool and ends after it (SandboxStatus, callThread,
//     Runner.SandboxInfo), the tool environment's allow-list
//     (CheckToolEnv) and the digest check of executables (DigestCache);
//   - calls made ready ahead (prepare_linux.go): the part of a sandboxed
//     call that does not depend on its tool, made after the call before
//     has answered, and the tidying up of a call after it answered.
//
// Decisions where the design leaves room:
//
//   - A variant without "match" (or with an empty one) always holds, so a
//     last variant can serve as a fallback. "resetsCounter" in a variant
//     overrides when present, false included (a bool has no empty value).
//     A match key repeated in one object keeps its last value.
//   - WatchDir reads the directory every second when it cannot have an
//     inotify instance, rather than give up watching it.
//   - Hidden files (".x.meta", editor lock files) are skipped silently; a
//     .meta over MaxFileSize, with a bad name, or that is a directory, is
//     a Problem.
//   - Args schemas are draft 2020-12 unless they say otherwise; references
//     outside the schema are refused, so a schema cannot make the node
//     read files or the network.
//   - Run kills what is left of a tool's process group when the tool
//     exits, and everything in the call's cgroup (or, without cgroups, the
//     orphans the node inherited as subreaper), so no process of a call
//     outlives it, setsid and double forks included. A call may have
//     RunnerConfig.MaxProcs processes where a pids controller exists (v2,
//     else the v1 pids hierarchy of a hybrid host); elsewhere there is no
//     per-call limit and Protections says so. Yolo turns containment off
//     with the sandbox: only the process group is killed. The tool's name
//     is $0 of a cmd run through /bin/sh -c. PATH entries that are not
//     absolute are not searched for tools.
//   - The sandbox (Landlock) lets a tool read and execute everything but
//     the protected trees (RunnerConfig.Protected and the scratch parent:
//     granted as the siblings along each protected path, see fsView),
//     write its scratch directory (TMPDIR), its session's working
//     directory unless its scope is "read", and /dev/null, /dev/zero,
//     /dev/full, /dev/tty and /dev/[u]random. Signals and abstract unix
//     sockets are scoped to the call where the kernel can (ABI 6),
//     pathname unix sockets confined to the writable directories where it
//     can (ABI 9); the tool gets an allow-listed environment, descriptors
//     0-2 only, and, under a root node, no capabilities. The network is
//     not restricted. Runner.SandboxInfo lists what the kernel provides
//     and names what it lacks.
//   - A sandboxed call takes, when one is ready and the layout it was
//     built from is unchanged, a scratch directory, cgroups, a thread in
//     them (capabilities dropped, no_new_privs) and a Landlock ruleset
//     (read view, scratch, readable trees, devices) made ahead; it adds
//     its cwd and, when the view does not grant it already (it lies in a
//     protected tree), its executable, and restricts the thread. Two are
//     kept ready for calls without a cwd around a protected path, one per
//     such cwd (up to 8), made again after a call has answered (beside
//     the tools only when calls at once have taken all of a kind). The
//     scratch directory is removed after Run
//     returns, in the background, and the cgroups are taken back: kept
//     for a later call (up to 16, each for up to 1000 calls) when nothing
//     of the call is left in them and they were never killed — the
//     kernel kills every process cloned into a v2 cgroup that was —, with
//     pids.max written again; else killed and removed. Close waits for it.
//   - The package's init locks the main goroutine to the process's first
//     thread, so that a sandboxed thread is never the thread group leader
//     (the kernel judges /proc/PID, signals and ptrace of the node by it).
//   - DigestCache checks an executable against its published SHA-256,
//     remembering digests by file identity; HideEnviron blanks the
//     process's start-up environment in /proc/PID/environ.

// It must not touch Raft, the network, gossip or 9P, and imports no other
// package of toolnode: the replicated state machine, the cluster and the 9P
// tree all use registry types, never the other way round. It keeps no
// global mutable state beyond caches (compiled schemas, the read rules of
// a Runner, digests) and never logs on
// its own: callers pass a logger where one is needed (WatchDir) and get
// problems back as values (ScanTools).
package registry
