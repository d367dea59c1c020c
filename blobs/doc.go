// Package blobs moves executables between nodes. The replicated state
// names a tool's executable by digest and size; the bytes live in each
// node's blob store (blobstore, DATA/blobs/sha256/HEX). The node that
// publishes an executable stores it before it proposes the command, so it
// always has it; every other node, when it learns of a digest it lacks,
// fetches the bytes in the background over the cluster port, from the
// publisher first and then from any other live node, streamed to a
// temporary file and checked against the digest before it becomes
// visible. A call that needs an executable not yet here waits for its
// fetch, bounded, and fails saying what it is waiting for. Blobs no tool
// refers to are removed after a grace period.
//
// A Service is given everything it needs from its node as values in
// Config: the store, the state it asks what is referenced, the live
// nodes to ask, and a dial of the cluster port. It imports no package of
// toolnode but blobstore.
//
// The wire exchange, on a cluster-port connection the node has opened
// for it (and authenticated): the asker sends the 64 hex digits of the
// digest and a newline; the answer is one byte, Have, Missing or Busy,
// and after Have the size (8 bytes, big-endian) and the bytes.
package blobs
