// Package calls owns what a call passes before its tool starts on this
// node: the -max-calls queue (first come, first served, a bounded wait,
// then "node busy") and the rules of DESIGN §7 for a session's working
// directory. It imports no package of toolnode.
package calls
