// Package testcluster is what the test harnesses of toolnode share: the
// 9P client helpers over 9fans.net/go/plan9/client (attach, cat, ask,
// ls), a poll with a deadline for every wait (Eventually, Poll), the
// real-process harness (a toolnode or any other process started with its
// flags and environment, stopped with SIGTERM then SIGKILL, its log
// waited on and shown), and GossipNet, an in-memory memberlist network
// for fast multi-node unit tests.
//
// It imports no toolnode package, so the tests of every package,
// node's included, can use it without an import cycle.
package testcluster
