// Package p9 serves the toolnode tree over 9P2000 (DESIGN §3): the same
// tree on every node, built from a Backend the node implements.
//
// # What it owns
//
// The package owns the 9P connection loop and the tree. It uses the
// message types, parsers and Compose of github.com/knusbaum/go9p/proto and
// nothing else of that library: the listener, the per-connection reader,
// workers and writer, the fid and tag tables and the frame checks are its
// own, because a server others connect to must survive any byte stream.
//
//   - Frames: a size below 7 or above the negotiated msize (MaxMsize
//     before Tversion) closes that connection with a logged reason. Every
//     other frame is checked field by field before the parser sees it; a
//     malformed body, a reply or an unknown type gets an Rerror with its
//     tag, and the connection goes on. The parser runs under recover.
//   - Concurrency: one reader per connection, at most MaxInflight requests
//     in flight (a worker each, workers reused), responses written one at a
//     time through a buffered writer that the last queued responder
//     flushes, so a burst goes out in one batch. When every slot is busy
//     the reader stops reading, so TCP slows a flooding client and the
//     server's memory stays bounded; other connections are not affected.
//     Requests read while every slot is busy wait in a queue as long as
//     MaxInflight; only when it is full does the reader stop. A Tflush
//     needs no slot, so a client can cancel even when every slot is busy.
//     At most MaxConns connections are served at once.
//   - Tflush cancels the request's context and waits until its response is
//     queued, then answers Rflush. Tversion aborts the session: in-flight
//     requests are cancelled and answered, every fid is clunked.
//   - Fids belong to one connection. Each open fid has a handle; a handle
//     is closed exactly once, at Tclunk, Tremove, Tversion or the end of
//     the connection, so no per-fid state outlives its connection.
//
// # Files
//
// Read-only files are generated at open and served from that snapshot; a
// read at offset 0 after other reads generates them again. Directories are
// read in whole stat entries at offset 0 or where the last read ended.
// Stat shows length 0, mtime = server start, owner Options.Owner, and a
// qid whose path is a hash of the file's path.
//
// Files that answer a write (tools, cluster/where, session/new,
// session/S/agent/new, session/S/ctl, agent/A/ctl, agent/A/tools, call)
// run the written text when the write returns, and keep the answer on that
// fid for reads from offset 0, as plan9port's "9p rdwr" reads it. Each
// non-blank line is one command, run in order, stopping at the first
// error; the answer is the lines' answers concatenated. A failed command
// is an error on the write, and clears the fid's answer. A read before any
// write returns a usage line (agent/A/tools: the loaded list).
//
// Answers of agent/A/ctl: "tool_load NAME" answers "loaded NAME",
// "tool_unload NAME" answers "unloaded NAME", "kill" answers
// "killed agent A", "tools_all" answers Backend.ToolsAll. A write to
// agent/A/tools loads every name written, one a line, and answers the
// loaded list.
//
// call accumulates writes at their offsets (a write at offset 0 starts a
// new request) until the text is "NAME" or "NAME JSON" with a whole JSON
// object, then runs it; the tool's output is the answer, byte for byte.
// A request over 1 MiB is an error. A read while the JSON is incomplete is
// an error that says so.
//
// events starts each fid at Backend.LastEvent; a read returns whole
// "INDEX KIND NAME" lines, waits up to Options.EventWait for one, and
// returns 0 bytes when none came.
//
// Session names "new" and "idx" and an agent named "new" are shadowed by
// the fixed files of their directories, and a tool named "idx" by t/idx;
// the Backend should refuse them. Unfinished uploads into t/ and a/ hold
// at most Options.MaxUploadBytes on the whole server.
//
// # Publishing through t/ and a/
//
// t/ lists idx, NAME.meta for every tool whose metadata is published and
// NAME for every tool with a published executable; a/ lists NAME.json for
// every profile. Creating, writing and clunking t/NAME.meta, t/NAME or
// a/NAME.json on any node publishes it cluster-wide (Backend.PublishToolMeta,
// PublishToolExec, PublishProfile); Tremove withdraws it (WithdrawTool,
// RemoveToolExec, WithdrawProfile). t/idx cannot be written or removed.
//
//   - Names: Tcreate takes NAME.meta and NAME in t/, NAME.json in a/, where
//     NAME is [A-Za-z0-9][A-Za-z0-9_.-]{0,127} and a tool is never "idx";
//     a name ending in .meta is always metadata. Directories cannot be made.
//     A create must open for writing. It makes the fid the new file, open
//     on an empty buffer; until its clunk, walks on any connection find the
//     file (9pfuse walks to what it just created), and nothing is
//     published. Creating a file that exists replaces it the same way.
//   - Buffers: a fid open for writing (Tcreate, or Topen with OWRITE or
//     ORDWR) writes into a private buffer at the writes' offsets, gaps
//     filled with zeros. It starts as the published text, or empty with
//     OTRUNC. Reads on that fid see the buffer; every other fid sees only
//     what is published, so no reader ever sees half a file. Metadata and
//     profiles are limited to 1 MiB, executables to Backend.MaxExecutable
//     (64 MiB when that is not positive); the write that crosses the limit
//     fails.
//   - JSON (NAME.meta, NAME.json): after each write, if the buffer is one
//     whole JSON value (white space around it dropped) that this fid has
//     not published yet, it is published at once; the Backend's refusal is
//     the error of that write, which then changes nothing. At clunk, a
//     buffer changed since this fid last published is published if it is
//     whole JSON; otherwise the Tclunk fails with "incomplete JSON: nothing
//     was published" or "is not valid JSON". The fid is clunked either way.
//   - Executables (NAME): published at clunk with their mode; the
//     Backend's refusal is the error of the Tclunk. The mode is the
//     permission bits of the Tcreate, or the published mode for a file
//     opened for writing. A mode without an execute bit is published as
//     given, but nodes only run executables that have one.
//   - A fid that wrote nothing publishes nothing at clunk, and neither does
//     one with a refused write. Only Tclunk publishes: a Tremove of a fid
//     open for writing, a Tversion and the end of a connection drop its
//     buffer.
//   - Twstat: a length of 0 empties the buffer of a fid open for writing
//     and is accepted, doing nothing, on any other fid of t/ and a/ (the
//     open that follows, with OTRUNC, replaces the content). A new mode on
//     t/NAME (chmod) applies to the fids writing it, and publishes the
//     published executable again with that mode. Only the permission bits
//     of a mode count.
//
// Stat lengths stay 0 for these files too; readers read to the end.
//
// # Who may do what
//
// Options.Attach turns each attach name (a token, or "" for none) into a
// Principal; every fid carries the Principal of the attach it was walked
// from, and walk, open, create, remove and wstat check the role of what
// they touch (tokens.go), failing with "permission denied: needs role
// ROLE". token/new, token/idx and token/ctl serve a TokenBackend to
// admins; DropPrincipal ends the connections of a revoked token. One
// connection holds at most Options.MaxFids fids, and its unfinished
// uploads at most Options.MaxConnUploadBytes.
//
// # What it must not touch
//
// p9 imports neither raftfsm, cluster nor registry: everything it serves
// comes through Backend, whose error texts it passes on as they are.
package p9
