package registry

import "errors"

// Sentinel errors of the package. Every error returned by the package that
// belongs to one of these kinds wraps the sentinel with %w and adds a
// sentence naming what failed and why; test with errors.Is.
var (
	// ErrInvalidName: a tool or profile name breaks the naming rule.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidMeta: a .meta document is not valid JSON, has fields of
	// the wrong type or value, or an args schema that does not compile.
	ErrInvalidMeta = errors.New("invalid tool metadata")
	// ErrInvalidProfile: an agent profile is not a valid profile document.
	ErrInvalidProfile = errors.New("invalid agent profile")
	// ErrInvalidArgs: call arguments are not one JSON object, or do not
	// satisfy the tool's args schema. Nothing was run.
	ErrInvalidArgs = errors.New("invalid arguments")
	// ErrNoCommand: the tool has no executable, no cmd, and its name is
	// not found in $PATH. Nothing was run.
	ErrNoCommand = errors.New("no command to run")
	// ErrTimeout: the call ran past its time limit; its process group was
	// killed.
	ErrTimeout = errors.New("timed out")
	// ErrOutputCap: the tool wrote more standard output than the cap
	// allows; its process group was killed.
	ErrOutputCap = errors.New("output over the cap")
	// ErrBadOutput: a tool whose outputFormat is json printed something
	// that is not valid JSON.
	ErrBadOutput = errors.New("output is not valid JSON")
)
