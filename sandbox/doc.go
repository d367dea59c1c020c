// Package sandbox starts the process of a tool call confined, and holds
// it until nothing of it is left.
//
// It owns:
//
//   - running one call's process (Sandbox.Run): a process group of its
//     own, the arguments on standard input, standard output up to a cap,
//     the tail of standard error, the exit status; the call killed when
//     its context is done or its output goes over the cap;
//   - holding a call's processes: a cgroup per call (cgroup.kill,
//     pids.max), reused by a later call once empty, or, without one, the
//     node as child subreaper sweeping its orphans (the reaper); the list
//     of protections in force (Sandbox.Protections);
//   - the Landlock sandbox, applied to a dedicated thread of the node that
//     starts the tool and ends after it (Status, callThread,
//     Sandbox.Info), the read view of the file system (fsView), the
//     network filter (a Landlock layer, and seccomp for MPTCP), the tool
//     environment's allow-list (EnvAllowed, CheckToolEnv) and the digest
//     check of executables (DigestCache);
//   - calls made ready ahead (prepare_linux.go): the part of a sandboxed
//     call that does not depend on its tool, made after the call before
//     has answered, and the tidying up of a call after it answered.
//
// Decisions where the design leaves room:
//
//   - Run kills what is left of a tool's process group when the tool
//     exits, and everything in the call's cgroup (or, without cgroups, the
//     orphans the node inherited as subreaper), so no process of a call
//     outlives it, setsid and double forks included. A call may have
//     Config.MaxProcs processes where a pids controller exists (v2, else
//     the v1 pids hierarchy of a hybrid host); elsewhere there is no
//     per-call limit and Protections says so. Config.Off (-yolo) turns
//     containment off with the sandbox: only the process group is killed.
//   - The sandbox (Landlock) lets a tool read and execute everything but
//     the protected trees (Config.Protected and the scratch parent:
//     granted as the siblings along each protected path, see fsView),
//     write its scratch directory (TMPDIR), its session's working
//     directory unless Call.ReadOnly, and /dev/null, /dev/zero, /dev/full,
//     /dev/tty and /dev/[u]random. Signals and abstract unix sockets are
//     scoped to the call where the kernel can (ABI 6), pathname unix
//     sockets confined to the writable directories where it can (ABI 9);
//     without Call.Network the tool opens no TCP socket (ABI 4; UDP from
//     ABI 10) and no MPTCP socket. The tool gets the environment it is
//     given, descriptors 0-2 only, and, under a root node, no
//     capabilities. Sandbox.Info lists what the kernel provides and names
//     what it lacks.
//   - A sandboxed call takes, when one is ready and the layout it was
//     built from is unchanged, a scratch directory, cgroups, a thread in
//     them (capabilities dropped, no_new_privs) and a Landlock ruleset
//     (read view, scratch, readable trees, devices) made ahead; it adds
//     its cwd and, when the view does not grant it already (it lies in a
//     protected tree), its executable, and restricts the thread. Two are
//     kept ready for calls without a cwd around a protected path, one per
//     such cwd (up to 8), made again after a call has answered (beside
//     the tools only when calls at once have taken all of a kind). The
//     scratch directory is removed after Run returns, in the background,
//     and the cgroups are taken back: kept for a later call (up to 16,
//     each for up to 1000 calls) when nothing of the call is left in them
//     and they were never killed — the kernel kills every process cloned
//     into a v2 cgroup that was —, with pids.max written again; else
//     killed and removed. Close waits for it.
//   - The package's init locks the main goroutine to the process's first
//     thread, so that a sandboxed thread is never the thread group leader
//     (the kernel judges /proc/PID, signals and ptrace of the node by it).
//   - DigestCache checks an executable against its published SHA-256,
//     remembering digests by file identity; HideEnviron blanks the
//     process's start-up environment in /proc/PID/environ.
//
// It knows nothing of tools, their metadata or the cluster, and imports
// no other package of toolnode: registry's Runner decides what a call
// runs and with which environment, and asks a Sandbox to run it. It keeps
// no global mutable state beyond caches (the read rules of a Sandbox,
// digests, the network layer) and the node's record of the calls it
// started (the reaper), and never logs.
package sandbox
