package raftfsm

import (
	"encoding/json"
	"fmt"
)

// CommandType is the first byte of every log entry this FSM applies.
type CommandType uint8

// The commands. Values are part of the on-disk log format: append new ones,
// never renumber.
const (
	CmdPublishTools CommandType = iota + 1
	CmdWithdrawTools
	CmdPublishProfiles
	CmdWithdrawProfiles
	CmdCreateSession
	CmdKillSession
	CmdCreateAgent
	CmdKillAgent
	CmdLoad
	CmdUnload
)

var commandNames = map[CommandType]string{
	CmdPublishTools:     "publish-tools",
	CmdWithdrawTools:    "withdraw-tools",
	CmdPublishProfiles:  "publish-profiles",
	CmdWithdrawProfiles: "withdraw-profiles",
	CmdCreateSession:    "create-session",
	CmdKillSession:      "kill-session",
	CmdCreateAgent:      "create-agent",
	CmdKillAgent:        "kill-agent",
	CmdLoad:             "load",
	CmdUnload:           "unload",
}

func (t CommandType) String() string {
	if n, ok := commandNames[t]; ok {
		return n
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// ToolSpec is one tool in a PublishTools command.
type ToolSpec struct {
	Name string `json:"name"`
	// Meta is the .meta document as published (variants unresolved). The
	// proposer has validated it.
	Meta []byte `json:"meta"`
	// Exec is the tool's executable, if it publishes one. Empty with
	// ExecHash set means "the same executable as already stored".
	Exec []byte `json:"exec,omitempty"`
	// ExecHash is the hex SHA-256 of the executable, "" for none.
	ExecHash string `json:"execHash,omitempty"`
}

// PublishTools adds or replaces tools. The publishing node becomes their
// owner (last write wins).
type PublishTools struct {
	Owner string     `json:"owner"`
	Time  int64      `json:"time"` // unix nanoseconds, stamped by the proposer
	Tools []ToolSpec `json:"tools"`
}

// WithdrawTools removes tools. With Owner set, only the tools that Owner
// owns are removed (a node's watcher withdraws only its own); with Owner
// empty, the named tools are removed whoever owns them.
type WithdrawTools struct {
	Owner string   `json:"owner,omitempty"`
	Names []string `json:"names"`
}

// ProfileSpec is one agent profile in a PublishProfiles command.
type ProfileSpec struct {
	Name     string   `json:"name"`
	Data     []byte   `json:"data"`
	AutoLoad []string `json:"autoLoad,omitempty"`
}

// PublishProfiles adds or replaces agent profiles.
type PublishProfiles struct {
	Owner    string        `json:"owner"`
	Profiles []ProfileSpec `json:"profiles"`
}

// WithdrawProfiles removes profiles; Owner as in WithdrawTools.
type WithdrawProfiles struct {
	Owner string   `json:"owner,omitempty"`
	Names []string `json:"names"`
}

// CreateSession makes a session. An empty Name gets a generated one
// ("s1", "s2", ...). With Profile set, the session starts with one agent
// named after the profile, made from it.
type CreateSession struct {
	Name    string `json:"name,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Profile string `json:"profile,omitempty"`
	Time    int64  `json:"time"`
}

// KillSession removes a session and its agents.
type KillSession struct {
	Name string `json:"name"`
}

// CreateAgent makes an agent in a session. An empty Name gets a generated
// one ("a1", ...); a Profile's autoLoad tools are loaded.
type CreateAgent struct {
	Session string `json:"session"`
	Name    string `json:"name,omitempty"`
	Profile string `json:"profile,omitempty"`
}

// KillAgent removes an agent.
type KillAgent struct {
	Session string `json:"session"`
	Name    string `json:"name"`
}

// Load adds tools to an agent's loaded set; Unload removes them. Either
// applies to all names or, on error, to none.
type Load struct {
	Session string   `json:"session"`
	Agent   string   `json:"agent"`
	Names   []string `json:"names"`
}

// Unload: see Load.
type Unload Load

// Encode makes a log entry: the type byte, then the JSON body.
func Encode(t CommandType, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, byte(t))
	return append(out, b...), nil
}

// MustEncode is Encode for bodies that cannot fail to marshal (the
// command structs of this package).
func MustEncode(t CommandType, body any) []byte {
	b, err := Encode(t, body)
	if err != nil {
		panic(err)
	}
	return b
}
