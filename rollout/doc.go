// Package rollout is the service behind v/ (DESIGN §8): a tool's kept
// versions as the 9P tree shows them, rollbacks, canaries (canary,
// promote, abort), the leader's check of a canary command before it is
// appended, and the automatic abort: each canary node counts the
// outcomes of the canary version's calls it runs and reports them, and
// the leader aborts a canary that fails more than half of at least
// raftfsm.FailMinCalls calls.
//
// The replicated state is raftfsm's; a Service reads it from the FSM and
// writes through its Config.Apply, made for a principal (Caller), as the
// node's write path does. It imports raftfsm and p9 (for the entries of
// v/NAME/idx) and no other package of toolnode.
package rollout
