package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md from the flag set of toolnode serve")

// flagsDoc renders the flag set of toolnode serve as docs/flags.md. The
// defaults that come from the environment are rendered as on a machine
// with none of the variables set and a home directory of ~.
func flagsDoc(fs *flag.FlagSet) []byte {
	var b bytes.Buffer
	b.WriteString("# Flags of `toolnode serve`\n\n")
	b.WriteString("<!-- Generated from the flag set of toolnode serve; do not edit. Regenerate with\n")
	b.WriteString("     go test ./cmd/toolnode -run TestFlagsDoc -update -->\n\n")
	b.WriteString("`toolnode [serve] [flags]` runs a node; `toolnode serve -h` prints the same list.\n")
	b.WriteString("Defaults shown as `~/...` are under your home directory, and move with\n")
	b.WriteString("`$XDG_DATA_HOME`, `$XDG_CONFIG_HOME` and `$OLLIE_TOOLS_PATH`; `-encrypt`\n")
	b.WriteString("defaults to `$TOOLNODE_GOSSIP_KEY`. `$XDG_CONFIG_HOME/ollie/env` is read\n")
	b.WriteString("before the flags. What the flags do, with examples, is in\n")
	b.WriteString("[operating.md](operating.md) and [security.md](security.md).\n\n")
	b.WriteString("| flag | default | |\n|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		name := "-" + f.Name
		if arg != "" {
			name += " " + arg
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			def = "`" + f.DefValue + "`"
		}
		usage = strings.ReplaceAll(usage, "|", `\|`)
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, def, usage)
	})
	return b.Bytes()
}

func TestFlagsDoc(t *testing.T) {
	for _, v := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "OLLIE_TOOLS_PATH", "TOOLNODE_GOSSIP_KEY"} {
		t.Setenv(v, "")
	}
	t.Setenv("HOME", "~")
	var o serveOptions
	got := flagsDoc(serveFlags(&o))
	path := filepath.Join("..", "..", "docs", "flags.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/toolnode -run TestFlagsDoc -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/flags.md differs from the flags of toolnode serve; regenerate it with\n\tgo test ./cmd/toolnode -run TestFlagsDoc -update\nwant:\n%s", got)
	}
}
