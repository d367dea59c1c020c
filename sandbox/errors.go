package sandbox

import "errors"

// Sentinel errors of the package; the errors that belong to one wrap it
// with %w and add a sentence naming what failed and why. Test with
// errors.Is.
var (
	// ErrNoSandbox: the sandbox is required (no -yolo) but this host
	// cannot provide it. Nothing was run.
	ErrNoSandbox = errors.New("sandbox unavailable")
	// ErrExecDigest: an executable's content is not what was published
	// (its SHA-256 differs). Nothing was run.
	ErrExecDigest = errors.New("invalid executable: its digest does not match")
)

// StderrTail is how much of the end of a call's standard error its
// Result keeps.
const StderrTail = 2 << 10
