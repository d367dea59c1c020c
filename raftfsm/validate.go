package raftfsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/toolnode/toolnode/acl"

	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/upstream"
)

// The leader validates every command before it appends it (Validate), so
// nothing the leader refuses reaches the log. Apply does not rely on it:
// an entry it cannot decode or apply is skipped (see FSM.Apply), because
// a log written by an older leader, or forged around the leader, must not
// crash a node either.

// DefaultMaxExecSize is the largest executable a command may name by
// default (-max-exec-size).
const DefaultMaxExecSize = 256 << 20

// Limits are the bounds Validate checks that are the operator's to set.
type Limits struct {
	// MaxExecSize is the largest executable a command may name, in
	// bytes (DefaultMaxExecSize when not positive).
	MaxExecSize int64
}

func (l Limits) maxExec() int64 {
	if l.MaxExecSize <= 0 {
		return DefaultMaxExecSize
	}
	return l.MaxExecSize
}

// maxCwd bounds a session's working directory.
const maxCwd = 4096

// maxOwner bounds a session's owner: a token's name, or anon@ and an IP
// address, or node:NAME.
const maxOwner = 256

// validator checks one command's body. It decodes the body strictly (no
// unknown fields, nothing after the value) and checks every field that the
// apply function trusts: names, origins, hashes, modes and sizes. It does
// not read the state: whether a named thing exists is Apply's to say.
type validator func(body []byte, lim Limits) error

// validators holds a validator for every command type. A command type
// without one is refused: a new type registers its validator here (or
// from an init function in its own file) together with its apply
// function in applyTable.
var validators = map[CommandType]validator{
	CmdPublishTools:     validatePublishTools,
	CmdWithdrawTools:    validateWithdrawTools,
	CmdPublishProfiles:  validatePublishProfiles,
	CmdWithdrawProfiles: validateWithdrawProfiles,
	CmdCreateSession:    validateCreateSession,
	CmdKillSession:      validateKillSession,
	CmdCreateAgent:      validateCreateAgent,
	CmdKillAgent:        validateKillAgent,
	CmdLoad:             validateLoad,
	CmdUnload:           validateUnload,
	CmdPutToolMeta:      validatePutToolMeta,
	CmdPutToolExec:      validatePutToolExec,
	CmdDropToolExec:     validateDropToolExec,
	CmdPutToken:         validatePutToken,
	CmdRevokeToken:      validateRevokeToken,
	CmdSetKeepVersions:  validateSetKeepVersions,
	CmdRollback:         validateRollback,
	CmdAddKey:           validateAddKey,
	CmdRemoveKey:        validateRemoveKey,
	CmdCanary:           validateCanary,
	CmdPromote:          validatePromote,
	CmdAbort:            validateAbort,
	CmdCanaryReport:     validateCanaryReport,
}

// Validate checks a log entry before it is proposed: a known command type
// whose body decodes strictly into its struct, with valid names, origins,
// hashes, modes and sizes. Its error wraps ErrInvalid and says what is
// wrong. It is a pure function of entry.
func Validate(entry []byte) error { return ValidateLimits(entry, Limits{}) }

// ValidateLimits is Validate with the operator's limits: the leader's own
// -max-exec-size, so the bound is the same whichever node a write enters.
func ValidateLimits(entry []byte, lim Limits) error {
	if len(entry) == 0 {
		return refuse(ErrInvalid, "empty command")
	}
	t := CommandType(entry[0])
	v, ok := validators[t]
	if _, known := applyTable[t]; !ok || !known {
		return refuse(ErrInvalid, "unknown command type %d", entry[0])
	}
	if err := v(entry[1:], lim); err != nil {
		return refuse(ErrInvalid, "invalid %s command: %v", t, err)
	}
	return nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// a null body and anything after the object.
func decodeStrict(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return errors.New("the body is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("undecodable body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON body")
	}
	return nil
}

func checkOwner(owner string, required bool) error {
	if owner == "" && !required {
		return nil
	}
	if err := registry.ValidName(owner); err != nil {
		return fmt.Errorf("bad owner (node name): %v", err)
	}
	return nil
}

func checkOrigin(origin string, emptyOK bool) error {
	switch origin {
	case OriginDir, Origin9P:
		return nil
	case "":
		if emptyOK {
			return nil
		}
	}
	return fmt.Errorf("origin %q is neither %q nor %q", origin, OriginDir, Origin9P)
}

// checkToolOrigin is checkOrigin for a tool, which may also be one an
// upstream MCP server offers (OriginMCP). A tool of another origin may
// not be named like one: "__" separates a server's name from its tool's.
func checkToolOrigin(origin, name string) error {
	if origin == OriginMCP {
		if _, _, ok := strings.Cut(name, upstream.Sep); !ok {
			return fmt.Errorf("tool %q of origin %q is not named SERVER__TOOL", name, OriginMCP)
		}
		return nil
	}
	if strings.Contains(name, upstream.Sep) {
		return fmt.Errorf("tool name %q: %q is for the tools of upstream MCP servers (SERVER__TOOL); choose another name", name, upstream.Sep)
	}
	return nil
}

func checkTime(t int64) error {
	if t < 0 {
		return fmt.Errorf("time %d is negative", t)
	}
	return nil
}

func checkNames(kind string, names []string) error {
	for _, n := range names {
		if err := checkName(kind, n); err != nil {
			return err
		}
	}
	return nil
}

// checkExec checks an executable's digest, size and mode. A new command
// names its executable by digest and size and never carries its bytes:
// nodes fetch them outside the log. Without a digest there is no
// executable.
func checkExec(name string, hash string, size int64, mode uint32, lim Limits) error {
	if mode&^0o7777 != 0 {
		return fmt.Errorf("the mode %#o of tool %q has bits beyond 07777", mode, name)
	}
	if hash == "" {
		if size != 0 {
			return fmt.Errorf("the executable of tool %q has a size and no hash", name)
		}
		return nil
	}
	if !isHexHash(hash) {
		return fmt.Errorf("the executable hash of tool %q is not 64 lowercase hex digits", name)
	}
	if size <= 0 {
		return fmt.Errorf("the executable of tool %q has no size (%d)", name, size)
	}
	if max := lim.maxExec(); size > max {
		return fmt.Errorf("file too long: the executable of tool %q is %d bytes, over the %d-byte limit (-max-exec-size)", name, size, max)
	}
	return nil
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func checkMeta(name string, meta []byte) error {
	if len(meta) == 0 {
		return fmt.Errorf("the metadata of tool %q is empty", name)
	}
	if _, _, err := registry.ParseMeta(meta); err != nil {
		return fmt.Errorf("the metadata of tool %q: %v", name, err)
	}
	return nil
}

func validatePublishTools(body []byte, lim Limits) error {
	var c PublishTools
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, true); err != nil {
		return err
	}
	if c.Origin != OriginMCP {
		if err := checkOrigin(c.Origin, true); err != nil {
			return err
		}
	}
	if err := checkTime(c.Time); err != nil {
		return err
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	seen := make(map[string]bool, len(c.Tools))
	for _, t := range c.Tools {
		if err := checkName("tool", t.Name); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("tool %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if err := checkToolOrigin(c.Origin, t.Name); err != nil {
			return err
		}
		if err := checkMeta(t.Name, t.Meta); err != nil {
			return err
		}
		if err := checkExec(t.Name, t.ExecHash, t.Size, t.Mode, lim); err != nil {
			return err
		}
		if err := checkSig(t.Sig); err != nil {
			return err
		}
	}
	return nil
}

func validateWithdrawTools(body []byte, lim Limits) error {
	var c WithdrawTools
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, false); err != nil {
		return err
	}
	if c.Origin != OriginMCP {
		if err := checkOrigin(c.Origin, true); err != nil {
			return err
		}
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	if err := checkTime(c.Time); err != nil {
		return err
	}
	return checkNames("tool", c.Names)
}

func validatePutToolMeta(body []byte, lim Limits) error {
	var c PutToolMeta
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, true); err != nil {
		return err
	}
	if err := checkOrigin(c.Origin, false); err != nil {
		return err
	}
	if err := checkTime(c.Time); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if err := checkToolOrigin(c.Origin, c.Name); err != nil {
		return err
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	if err := checkSig(c.Sig); err != nil {
		return err
	}
	return checkMeta(c.Name, c.Meta)
}

func validatePutToolExec(body []byte, lim Limits) error {
	var c PutToolExec
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, true); err != nil {
		return err
	}
	if err := checkOrigin(c.Origin, false); err != nil {
		return err
	}
	if err := checkTime(c.Time); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if c.ExecHash == "" {
		return fmt.Errorf("the executable of tool %q has no hash", c.Name)
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	if err := checkSig(c.Sig); err != nil {
		return err
	}
	return checkExec(c.Name, c.ExecHash, c.Size, c.Mode, lim)
}

func validateDropToolExec(body []byte, lim Limits) error {
	var c DropToolExec
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, false); err != nil {
		return err
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	if err := checkTime(c.Time); err != nil {
		return err
	}
	if err := checkSig(c.Sig); err != nil {
		return err
	}
	return checkName("tool", c.Name)
}

func validatePublishProfiles(body []byte, lim Limits) error {
	var c PublishProfiles
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, true); err != nil {
		return err
	}
	if err := checkOrigin(c.Origin, true); err != nil {
		return err
	}
	seen := make(map[string]bool, len(c.Profiles))
	for _, p := range c.Profiles {
		if err := checkName("profile", p.Name); err != nil {
			return err
		}
		if seen[p.Name] {
			return fmt.Errorf("profile %q appears twice", p.Name)
		}
		seen[p.Name] = true
		if _, err := registry.ParseProfile(p.Data); err != nil {
			return fmt.Errorf("profile %q: %v", p.Name, err)
		}
		if err := checkNames("tool", p.AutoLoad); err != nil {
			return fmt.Errorf("profile %q: autoLoad: %v", p.Name, err)
		}
		if err := acl.CheckTools(p.Tools); err != nil {
			return fmt.Errorf("profile %q: %v", p.Name, err)
		}
	}
	return nil
}

func validateWithdrawProfiles(body []byte, lim Limits) error {
	var c WithdrawProfiles
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, false); err != nil {
		return err
	}
	if err := checkOrigin(c.Origin, true); err != nil {
		return err
	}
	return checkNames("profile", c.Names)
}

func validateCreateSession(body []byte, lim Limits) error {
	var c CreateSession
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if c.Name != "" {
		if err := checkName("session", c.Name); err != nil {
			return err
		}
	}
	if len(c.Owner) > maxOwner {
		return fmt.Errorf("session owner of %d bytes: at most %d", len(c.Owner), maxOwner)
	}
	if err := acl.CheckTools(c.Limit); err != nil {
		return err
	}
	if c.Profile != "" {
		// The profile names the session's first agent too.
		if err := checkName("agent", c.Profile); err != nil {
			return err
		}
	}
	if c.Cwd != "" {
		switch {
		case len(c.Cwd) > maxCwd:
			return fmt.Errorf("cwd is %d bytes, over the %d-byte limit", len(c.Cwd), maxCwd)
		case !path.IsAbs(c.Cwd):
			return fmt.Errorf("cwd %q is not an absolute path", c.Cwd)
		case bytes.IndexByte([]byte(c.Cwd), 0) >= 0:
			return errors.New("cwd contains a NUL byte")
		}
	}
	return checkTime(c.Time)
}

func validateKillSession(body []byte, lim Limits) error {
	var c KillSession
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	return checkName("session", c.Name)
}

func validateCreateAgent(body []byte, lim Limits) error {
	var c CreateAgent
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("session", c.Session); err != nil {
		return err
	}
	if err := acl.CheckTools(c.Limit); err != nil {
		return err
	}
	if c.Name != "" {
		if err := checkName("agent", c.Name); err != nil {
			return err
		}
	}
	if c.Profile != "" {
		return checkName("profile", c.Profile)
	}
	return nil
}

func validateKillAgent(body []byte, lim Limits) error {
	var c KillAgent
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("session", c.Session); err != nil {
		return err
	}
	return checkName("agent", c.Name)
}

func validateLoad(body []byte, lim Limits) error {
	var c Load
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	return checkLoad(c)
}

func validateUnload(body []byte, lim Limits) error {
	var c Unload
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	return checkLoad(Load(c))
}

func checkLoad(c Load) error {
	if err := checkName("session", c.Session); err != nil {
		return err
	}
	if err := checkName("agent", c.Agent); err != nil {
		return err
	}
	if len(c.Names) == 0 {
		return errors.New("no tool names")
	}
	return checkNames("tool", c.Names)
}
