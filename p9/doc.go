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
// Stat shows owner Options.Owner and a qid whose path is a hash of the
// file's path. The files of t/ and a/ show their true length (what a
// read returns now; on a fid open for writing, its buffer's) and, as
// mtime, when their version was published (Backend.ToolTime,
// ProfileTime; t/idx: the newest of its tools'), so seeking from the
// end, cp, mmap and exec through a mount work. Every other file shows
// length 0 and the server's start.
//
// Error texts are for people and for the clients that map them to errno:
// plan9port's 9pfuse takes the first phrase of its table found in the
// text, the Linux kernel only exact strings. A walk that finds nothing is
// exactly "file does not exist" (ENOENT under both, so cp goes on to
// create); a refusal for lack of rights contains "permission denied"
// (EACCES), bad content or names "invalid" (EINVAL), limits "too long",
// a full table "temporarily unavailable" (EAGAIN); the detail follows.
//
// Files that answer a write (tools, cluster/where, session/new,
// session/S/agent/new, session/S/ctl, agent/A/ctl, agent/A/tools, call)
// run the written text when the write returns, and keep the answer on that
// fid for reads from offset 0, as plan9port's "9p rdwr" reads it. Each
// non-blank line is one command, run in order, stopping at the first
// error; the answer is the lines' answers concatenated. A failed command
// is an error on the write, and clears the fid's answer. A read before any
// write returns nothing (0 bytes) and never blocks, so plan9port's
// "9p rdwr", which reads first, prints only answers; agent/A/tools, which
// has contents of its own, returns the loaded list.
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
// an error that says so; a read before any request returns nothing. With a
// Backend that implements CallStarter, the write that completes a request
// answers once StartCall's checks pass (failing on them) and the call
// runs on that request's worker after its Rwrite, holding the fid's lock:
// a read waits for the end and fails with the run's error; a clunk or the
// end of the connection cancels the run, a flush of a waiting read does
// not. Without it the write runs Backend.Call and answers at the end.
//
// A walk to session/S or session/S/agent/A asks the Backend whether the
// name exists: through Walker when it implements it (a node's follower
// finds a name it has without asking the leader), else by listing the
// session's agents.
//
// events starts each fid at Backend.LastEvent; a read returns whole
// "INDEX KIND NAME" lines, waits up to Options.EventWait for one, and
// returns 0 bytes when none came. EventRing is an EventLog kept in
// memory, a bounded ring of the newest events, that a Backend can serve
// them from (eventring.go).
//
// Session names "new" and "idx" and an agent named "new" are shadowed by
// the fixed files of their directories, and a tool named "idx" by t/idx;
// the Backend should refuse them. Unfinished uploads into t/ and a/ hold
// at most Options.MaxUploadBytes on the whole server. An executable is
// never held whole in memory: an upload of t/NAME writes into a scratch
// file the Backend makes (Backend.NewExecUpload), and a read of t/NAME
// reads the Backend's file at its offsets (Backend.ToolExecutable).
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
//     A create may use any open mode (plan9port's "9p create" uses OREAD
//     and writes on a later open). It makes the fid the new file, open on
//     an empty buffer, and the file pending: walks and directory reads on
//     any connection find it (9pfuse walks to what it just created), reads
//     see it empty, and nothing is published. It stays pending until a
//     clunk publishes it, a Tremove drops it (removing a pending file
//     publishes and withdraws nothing), or Options.PendingTTL passes after
//     its last fid closed; at most maxPendingFiles are kept. Creating a
//     file that exists replaces it the same way.
//   - Buffers: a fid open for writing (Tcreate, or Topen with OWRITE or
//     ORDWR) writes into a private buffer at the writes' offsets, gaps
//     filled with zeros. It starts as the published text, or empty with
//     OTRUNC. Reads on that fid see the buffer; every other fid sees only
//     what is published, so no reader ever sees half a file. Metadata and
//     profiles are limited to 1 MiB, executables to Backend.MaxExecutable
//     (64 MiB when that is not positive); the write that crosses the limit
//     fails, as the bytes arrive. An executable's buffer is the Backend's
//     scratch file, made at the first write (with the published content
//     copied in when the open did not truncate).
//   - JSON (NAME.meta, NAME.json): a write that leaves the buffer unable
//     to become JSON whatever follows ("{bad") fails with "invalid JSON in
//     PATH: byte N ... cannot continue a JSON value" and changes nothing: a
//     FUSE client never sees the error of a close, so the write must fail.
//     The check is a streaming scan (jsonPrefix) that resumes where the
//     last write ended; a buffer with a hole is checked at clunk only.
//     After each write, if the buffer is one whole JSON value (white space
//     around it dropped) that this fid has not published yet, it is
//     published at once; the Backend's refusal is the error of that write,
//     which then changes nothing. At clunk, a buffer changed since this fid
//     last published is published if it is whole JSON; otherwise the
//     Tclunk fails with "invalid JSON in PATH: it is incomplete; nothing
//     was published". The fid is clunked either way.
//   - Executables (NAME): published at clunk; the Backend's refusal is the
//     error of the Tclunk. A created executable is published 0755 whatever
//     the perm of the Tcreate; a file opened for writing keeps its
//     published mode; a chmod (below) sets another.
//   - A refused write and a failed publish at clunk are logged (Logf)
//     with the file and the cause. A fid that wrote nothing publishes
//     nothing at clunk, and neither does one with a refused write. Only
//     Tclunk publishes: a Tremove of a fid open for writing, a Tversion
//     and the end of a connection drop its buffer.
//   - Truncation: a Twstat of length 0 empties the buffer of a fid open
//     for writing. On a fid of t/ or a/ that is not open it truncates the
//     path: every open upload of it, on every connection, is emptied, or,
//     when none is open, the next open for writing (within PendingTTL)
//     starts empty. An open with OTRUNC empties the path's other uploads
//     too, and one closed without a write truncates the path the same way.
//     9pfuse truncates so, on the node's fid, before or after it opens the
//     fid it writes on without OTRUNC. What is published changes only when
//     a clunk publishes.
//   - Twstat: a new mode on t/NAME (chmod) applies to the fids writing it,
//     and publishes the published executable again with that mode. Only
//     the permission bits of a mode count.
//
// # Versions
//
// v/NAME/ lists a tool's kept versions (versions.go), served by a Backend
// that implements Versions (else v/ is empty): idx, one line per version
// newest first ("VERSION STATE PUBLISHER TIME DIGEST SIGNER", '-' for an
// empty field), VERSION.meta and VERSION (read-only), and ctl, which
// takes "rollback VERSION" from the publish role, and, from a Backend
// that implements Canaries too, "canary NODE[,NODE] [manual]", "promote"
// and "abort".
//
// # Trusted keys and signatures
//
// trust/ (trust.go) is served by a Backend that implements Trust: idx
// ("NAME FINGERPRINT" lines) to every role, new ("NAME KEY-LINE") and
// ctl ("remove NAME") to admins, each taking the armored signature of the
// change on the lines after the command, in the same write. t/NAME.sig
// is write-only (publish role): the armored signature written to it is
// handed to a Backend that implements ToolSigs, for the next publish of
// NAME by the same principal; it is never listed.
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
// # TLS
//
// LoadTLS reads the certificate and key of -9p-tls-cert and -9p-tls-key
// (TLS 1.3; the server asks for no client certificate, the attach's token
// says who a client is) and refuses, naming the flag, a pair that does
// not belong together or a certificate no client would accept now.
// NewTLSListener runs each handshake beside the accept loop under a
// deadline, at most a bound at once, so Serve sees only connections whose
// handshake is complete (tls.go).
//
// # What it must not touch
//
// p9 imports neither raftfsm, cluster nor registry: everything it serves
// comes through Backend, whose error texts it passes on as they are.
package p9
