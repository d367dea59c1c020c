package upstream

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Imported is one server of a desktop client's config, as a definition
// ready to publish as m/NAME.json.
type Imported struct {
	Name string
	// JSON is the definition, indented.
	JSON []byte
	// Needs are the variables a host must have to run it.
	Needs []string
	// Notes say what the import changed or left out.
	Notes []string
}

// desktopKeys are the fields of a desktop client's server entry that a
// definition does not hold: the transport's type (implied by command or
// url), and the client's own approval and enablement settings.
var desktopKeys = map[string]bool{"type": true, "transport": true, "disabled": true, "autoApprove": true, "alwaysAllow": true, "timeout": true}

// Import reads a desktop client's config ({"mcpServers": {NAME: {...}}},
// as Claude Desktop, Cursor and VS Code write it) and returns its
// servers, sorted by name, as definitions. A literal value for a name
// that looks like a credential becomes a reference (${NAME}; a header's
// keeps its "Bearer " prefix) and a note, so no secret is published; a
// disabled server is left out with a note. A server that is not a valid
// definition after that is an error naming it.
func Import(config []byte) ([]Imported, error) {
	var top struct {
		Servers map[string]map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, fmt.Errorf("%w: not a client config: %v", ErrInvalid, err)
	}
	if len(top.Servers) == 0 {
		return nil, fmt.Errorf("%w: the config has no \"mcpServers\"", ErrInvalid)
	}
	names := make([]string, 0, len(top.Servers))
	for n := range top.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Imported
	for _, name := range names {
		im, err := importOne(name, top.Servers[name])
		if err != nil {
			return nil, err
		}
		if im != nil {
			out = append(out, *im)
		}
	}
	return out, nil
}

func importOne(name string, entry map[string]json.RawMessage) (*Imported, error) {
	im := &Imported{Name: name}
	if raw, ok := entry["disabled"]; ok && strings.TrimSpace(string(raw)) == "true" {
		return nil, nil
	}
	keep := map[string]json.RawMessage{}
	for k, v := range entry {
		if desktopKeys[k] {
			if k != "type" && k != "transport" {
				im.Notes = append(im.Notes, fmt.Sprintf("%s: left out %q, a setting of the desktop client", name, k))
			}
			continue
		}
		keep[k] = v
	}
	b, err := json.Marshal(keep)
	if err != nil {
		return nil, err
	}
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%w: server %s: %v", ErrInvalid, name, err)
	}
	for _, k := range sortedKeys(d.Env) {
		if looksSecret(k) && !strings.Contains(d.Env[k], "${") {
			d.Env[k] = "${" + k + "}"
			im.Notes = append(im.Notes, fmt.Sprintf("%s: env %s was a literal; it is now ${%s}, to be set on each host that runs the server", name, k, k))
		}
	}
	for _, k := range sortedKeys(d.Headers) {
		v := d.Headers[k]
		if looksSecret(k) && !strings.Contains(v, "${") {
			prefix := ""
			if p, _, ok := strings.Cut(v, " "); ok && strings.EqualFold(p, "bearer") {
				prefix = p + " "
			}
			d.Headers[k] = prefix + "${" + envName(k) + "}"
			im.Notes = append(im.Notes, fmt.Sprintf("%s: header %s was a literal; it is now %s${%s}, to be set on each host that runs the server", name, k, prefix, envName(k)))
		}
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("%w: server %s: %v", ErrInvalid, name, err)
	}
	im.Needs = d.Vars()
	if im.JSON, err = json.MarshalIndent(&d, "", "  "); err != nil {
		return nil, err
	}
	im.JSON = append(im.JSON, '\n')
	return im, nil
}
