package upstream

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// refRE is one ${VAR} reference.
var refRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// checkRefs refuses a "${" that does not start a well-formed reference.
func checkRefs(s string) error {
	rest := refRE.ReplaceAllString(s, "")
	if strings.Contains(rest, "${") {
		return fmt.Errorf("%q has a ${ that is not ${NAME} (letters, digits and '_')", s)
	}
	return nil
}

// Vars are the variables the definition references, sorted, each once.
func (d *Definition) Vars() []string {
	seen := map[string]bool{}
	add := func(s string) {
		for _, m := range refRE.FindAllStringSubmatch(s, -1) {
			seen[m[1]] = true
		}
	}
	add(d.Command)
	add(d.URL)
	for _, s := range d.Args {
		add(s)
	}
	for _, s := range d.Env {
		add(s)
	}
	for _, s := range d.Headers {
		add(s)
	}
	for _, s := range d.Read {
		add(s)
	}
	for _, s := range d.Write {
		add(s)
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Expand returns the definition with every reference replaced by its
// value from getenv, on the host that runs the server. A variable that
// is unset or empty is missing: such a host does not run the server, and
// missing names them. The definition itself is not changed.
func (d *Definition) Expand(getenv func(string) string) (out Definition, missing []string) {
	for _, v := range d.Vars() {
		if getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		return Definition{}, missing
	}
	x := func(s string) string {
		return refRE.ReplaceAllStringFunc(s, func(ref string) string { return getenv(ref[2 : len(ref)-1]) })
	}
	xs := func(in []string) []string {
		if in == nil {
			return nil
		}
		o := make([]string, len(in))
		for i, s := range in {
			o[i] = x(s)
		}
		return o
	}
	xm := func(in map[string]string) map[string]string {
		if in == nil {
			return nil
		}
		o := make(map[string]string, len(in))
		for k, v := range in {
			o[k] = x(v)
		}
		return o
	}
	out = *d
	out.Command, out.URL = x(d.Command), x(d.URL)
	out.Args, out.Read, out.Write = xs(d.Args), xs(d.Read), xs(d.Write)
	out.Env, out.Headers = xm(d.Env), xm(d.Headers)
	return out, nil
}
