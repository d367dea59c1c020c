package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/toolnode/toolnode/registry"
)

// ErrInvalid prefixes every refusal of a definition: 9P clients see
// "invalid: ...".
var ErrInvalid = errors.New("invalid")

// Definition is an upstream MCP server as m/NAME.json holds it.
type Definition struct {
	// Command, Args and Env start a server that speaks MCP on its
	// standard input and output.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach a server over Streamable HTTP.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Match holds the conditions under which a host runs the server.
	Match registry.Match `json:"match,omitempty"`
	// Network lets a stdio server reach the network; Read and Write are
	// the trees it may read and write beyond the sandbox's defaults.
	Network bool     `json:"network,omitempty"`
	Read    []string `json:"read,omitempty"`
	Write   []string `json:"write,omitempty"`
	// Tools, when given, are glob patterns (path.Match) of the server's
	// tools the cluster shows; the others are left out.
	Tools []string `json:"tools,omitempty"`
}

// nameRE is a server's name (DESIGN §9); "__" is also refused, since it
// separates the server from the tool in catalog names.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// CheckName refuses a server name that is not one.
func CheckName(name string) error {
	if !nameRE.MatchString(name) || strings.Contains(name, "__") {
		return fmt.Errorf("%w: server name %q: 1 to 32 letters, digits, '_' and '-', starting with a letter or digit, without \"__\"", ErrInvalid, name)
	}
	return nil
}

// Parse decodes and checks a definition. Unknown fields are refused, so
// a misspelt key is not silently ignored.
func Parse(name string, data []byte) (*Definition, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Definition
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: server %s: not a definition: %v", ErrInvalid, name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: server %s: more than one JSON value", ErrInvalid, name)
	}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("%w: server %s: %v", ErrInvalid, name, err)
	}
	return &d, nil
}

func (d *Definition) check() error {
	switch {
	case d.Command == "" && d.URL == "":
		return errors.New(`neither "command" (a stdio server) nor "url" (Streamable HTTP) is given`)
	case d.Command != "" && d.URL != "":
		return errors.New(`both "command" and "url" are given: a server is one or the other`)
	case d.URL != "" && (len(d.Args) > 0 || len(d.Env) > 0):
		return errors.New(`"args" and "env" are for a stdio server ("command"), not a "url"`)
	case d.Command != "" && len(d.Headers) > 0:
		return errors.New(`"headers" are for a "url", not a stdio server`)
	}
	if d.URL != "" && !strings.Contains(d.URL, "${") {
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q is not an http or https URL", d.URL)
		}
	}
	for _, s := range append(append([]string{d.Command, d.URL}, d.Args...), values(d.Env)...) {
		if err := checkRefs(s); err != nil {
			return err
		}
	}
	for _, s := range values(d.Headers) {
		if err := checkRefs(s); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(d.Env) {
		if looksSecret(k) && !strings.Contains(d.Env[k], "${") {
			return fmt.Errorf("literal value for %s; write ${%s}", k, k)
		}
	}
	for _, k := range sortedKeys(d.Headers) {
		if looksSecret(k) && !strings.Contains(d.Headers[k], "${") {
			return fmt.Errorf("literal value for header %s; write it as ${%s}", k, envName(k))
		}
	}
	for _, dir := range append(append([]string(nil), d.Read...), d.Write...) {
		if !filepath.IsAbs(dir) && !strings.HasPrefix(dir, "${") {
			return fmt.Errorf("read and write trees are absolute paths, not %q", dir)
		}
		if err := checkRefs(dir); err != nil {
			return err
		}
	}
	for _, p := range d.Tools {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("tools pattern %q is not a glob pattern", p)
		}
	}
	return nil
}

// Shows reports whether the cluster shows the server's tool named tool:
// always without an allow-list, else when a pattern matches it.
func (d *Definition) Shows(tool string) bool {
	if len(d.Tools) == 0 {
		return true
	}
	for _, p := range d.Tools {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// secretWords make a variable or header name look like a credential.
var secretWords = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL"}

// looksSecret reports whether name looks like that of a credential.
func looksSecret(name string) bool {
	u := strings.ToUpper(name)
	if u == "AUTHORIZATION" || u == "PROXY-AUTHORIZATION" {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// envName is the variable a header's value is kept in: its name in upper
// case with every character but letters and digits as '_'.
func envName(header string) string {
	b := []byte(strings.ToUpper(header))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
