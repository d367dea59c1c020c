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
	CmdPutToolMeta
	CmdPutToolExec
	CmdDropToolExec
	CmdPutToken        // tokens.go
	CmdRevokeToken     // tokens.go
	CmdSetKeepVersions // versions.go
	CmdRollback        // versions.go
	CmdAddKey          // trust.go
	CmdRemoveKey       // trust.go
	CmdCanary          // canary.go
	CmdPromote         // canary.go
	CmdAbort           // canary.go
	CmdCanaryReport    // canary.go
	CmdPutServer       // servers.go
	CmdDropServer      // servers.go
)

// Origins of a publication: a node's watched directory, or a write into
// t/ or a/ through 9P. A node's watcher withdraws only what it published
// from its directory.
const (
	OriginDir = "dir"
	Origin9P  = "9p"
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
	CmdPutToolMeta:      "put-tool-meta",
	CmdPutToolExec:      "put-tool-exec",
	CmdDropToolExec:     "drop-tool-exec",
	CmdPutToken:         "put-token",
	CmdRevokeToken:      "revoke-token",
	CmdSetKeepVersions:  "set-keep-versions",
	CmdRollback:         "rollback",
	CmdAddKey:           "add-key",
	CmdRemoveKey:        "remove-key",
	CmdCanary:           "canary",
	CmdPromote:          "promote",
	CmdAbort:            "abort",
	CmdCanaryReport:     "canary-report",
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
	// ExecHash is the hex SHA-256 of the executable, "" for none. The
	// bytes are not in the log: nodes fetch them from the proposer, or
	// any node that has them, by this digest.
	ExecHash string `json:"execHash,omitempty"`
	// Size is the executable's length in bytes.
	Size int64 `json:"size,omitempty"`
	// Mode is the executable's file mode (0755 when zero).
	Mode uint32 `json:"mode,omitempty"`
	// Sig is the armored SSH signature over the tool's manifest
	// (trust.go); empty: unsigned.
	Sig []byte `json:"sig,omitempty"`
}

// PublishTools adds or replaces tools. The publishing node becomes their
// owner (last write wins).
type PublishTools struct {
	Owner  string     `json:"owner"`
	Origin string     `json:"origin,omitempty"` // OriginDir when empty
	Time   int64      `json:"time"`             // unix nanoseconds, stamped by the proposer
	Tools  []ToolSpec `json:"tools"`
	// Publisher is the principal publishing (versions.go); empty:
	// node:OWNER.
	Publisher string `json:"publisher,omitempty"`
}

// WithdrawTools removes tools. With Owner set, only the tools that Owner
// owns are removed (a node's watcher withdraws only its own); with Owner
// empty, the named tools are removed whoever owns them.
type WithdrawTools struct {
	Owner string `json:"owner,omitempty"`
	// Origin, when set, limits the withdrawal to tools of that origin.
	Origin string   `json:"origin,omitempty"`
	Names  []string `json:"names"`
	// Publisher and Time are the principal withdrawing and when: the
	// withdrawn version's (versions.go).
	Publisher string `json:"publisher,omitempty"`
	Time      int64  `json:"time,omitempty"`
}

// PutToolMeta publishes one tool's metadata (t/NAME.meta written through
// 9P), keeping its executable if it has one.
type PutToolMeta struct {
	Owner  string `json:"owner"`
	Origin string `json:"origin"`
	Time   int64  `json:"time"`
	Name   string `json:"name"`
	Meta   []byte `json:"meta"`
	// Publisher: see PublishTools.
	Publisher string `json:"publisher,omitempty"`
	// Sig: see ToolSpec; over this metadata and the tool's executable.
	Sig []byte `json:"sig,omitempty"`
}

// PutToolExec publishes one tool's executable (t/NAME) by digest and
// size, keeping its metadata; the proposer holds the bytes. A tool with an executable and no metadata yet is not a tool
// until its metadata arrives: it is neither listed nor loadable.
type PutToolExec struct {
	Owner    string `json:"owner"`
	Origin   string `json:"origin"`
	Time     int64  `json:"time"`
	Name     string `json:"name"`
	ExecHash string `json:"execHash"`
	Size     int64  `json:"size,omitempty"`
	Mode     uint32 `json:"mode"`
	// Publisher: see PublishTools.
	Publisher string `json:"publisher,omitempty"`
	// Sig: see ToolSpec; over the tool's metadata and this executable.
	Sig []byte `json:"sig,omitempty"`
}

// DropToolExec removes a tool's executable (rm t/NAME).
type DropToolExec struct {
	Name string `json:"name"`
	// Owner, Publisher and Time are the version's it makes (all
	// optional).
	Owner     string `json:"owner,omitempty"`
	Publisher string `json:"publisher,omitempty"`
	Time      int64  `json:"time,omitempty"`
	// Sig: see ToolSpec; over the metadata with no executable.
	Sig []byte `json:"sig,omitempty"`
}

// ProfileSpec is one agent profile in a PublishProfiles command.
type ProfileSpec struct {
	Name     string   `json:"name"`
	Data     []byte   `json:"data"`
	AutoLoad []string `json:"autoLoad,omitempty"`
	// Tools is the profile's allow-list (DESIGN §9), as in Profile.
	Tools []string `json:"tools,omitempty"`
}

// PublishProfiles adds or replaces agent profiles.
type PublishProfiles struct {
	Owner    string        `json:"owner"`
	Origin   string        `json:"origin,omitempty"` // OriginDir when empty
	Profiles []ProfileSpec `json:"profiles"`
	Time     int64         `json:"time,omitempty"` // unix nanoseconds, stamped by the proposer
}

// WithdrawProfiles removes profiles; Owner as in WithdrawTools.
type WithdrawProfiles struct {
	Owner  string   `json:"owner,omitempty"`
	Origin string   `json:"origin,omitempty"`
	Names  []string `json:"names"`
}

// CreateSession makes a session. An empty Name gets a generated one
// ("s1", "s2", ...). With Profile set, the session starts with one agent
// named after the profile, made from it.
type CreateSession struct {
	Name string `json:"name,omitempty"`
	// Owner is the principal that made it (a token's name, anon@IP):
	// only it and admin may use the session (DESIGN §7).
	Owner   string `json:"owner,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Profile string `json:"profile,omitempty"`
	Time    int64  `json:"time"`
	// Limit is the maker's token's tools allow-list (DESIGN §9), kept by
	// the agent made with the session (Agent.Limit).
	Limit []string `json:"limit,omitempty"`
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
	// Limit is the maker's token's tools allow-list (Agent.Limit).
	Limit []string `json:"limit,omitempty"`
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
