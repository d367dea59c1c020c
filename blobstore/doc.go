// Package blobstore is a node's content-addressed store of executables:
// one read-only file per SHA-256 digest under DIR/sha256/<hex>.
//
// Bytes reach the store only through a temporary file in the same
// directory that is written, synced, hashed, checked against the digest
// and size it should have, made read-only and renamed into place, so a
// partial or corrupt write is never visible under a digest: a reader
// either finds the whole, verified file or nothing. Two writers of the
// same digest (two fetches, a fetch and an upload) both succeed; the
// second rename replaces identical bytes. Temporary files left by a
// crash are removed when the store is opened.
//
// The store streams: nothing here holds an executable in memory, so a
// node's memory does not grow with the size of what it stores or serves.
// It knows nothing of Raft, the network or 9P; package node decides what
// to fetch, from whom, and what to collect.
package blobstore
