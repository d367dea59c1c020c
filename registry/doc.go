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
//   - running a call (Runner): the arguments validated against the
//     tool's schema, the command resolved, the tool's environment made
//     (the allow-list of package sandbox, ToolEnv, the session's
//     variables), the timeout, and the outcome given a meaning (output,
//     ExitError with the stderr tail, ErrTimeout, ErrOutputCap,
//     ErrBadOutput); package sandbox starts and confines the process.
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
//   - The tool's name is $0 of a cmd run through /bin/sh -c. PATH entries
//     that are not absolute are not searched for tools.
//   - Under Yolo a tool gets the node's whole environment and runs
//     unconfined; otherwise only the allow-listed variables and ToolEnv.
//
// It must not touch Raft, the network, gossip or 9P, and imports no other
// package of toolnode but sandbox: the replicated state machine, the
// cluster and the 9P tree all use registry types, never the other way
// round. It keeps no global mutable state beyond caches (compiled
// schemas) and never logs on its own: callers pass a logger where one is
// needed (WatchDir) and get problems back as values (ScanTools).
package registry
