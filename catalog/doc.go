// Package catalog is a node's own view of the published tools: each
// tool's metadata resolved against this host's variants (registry's
// Resolver), so the node knows which tools this host can run, with which
// variant, and lists them in t/idx. It is derived from the replicated
// state, never replicated itself.
//
// Updates re-resolve the tools a command touched; a rebuild re-resolves
// every tool (after a snapshot is restored, and periodically, since a
// binary a variant asks for may have been installed since) without
// losing an update made while it runs. A node starting on a long log
// holds updates until its first rebuild, and offers the parses of its
// directory scan so the same bytes are not parsed twice.
package catalog
