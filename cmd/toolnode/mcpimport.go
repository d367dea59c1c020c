package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/toolnode/toolnode/upstream"
)

// mcpImport is `toolnode mcp import [-a ADDR] FILE`: the mcpServers of a
// desktop client's config file published as m/NAME.json, each over 9P,
// with the variables each host needs to run it.
func mcpImport(args []string) error {
	fs := newFlagSet("mcp import", "mcp import [-a ADDR] FILE")
	addr := fs.String("a", defaultAddr(), "node 9P address")
	cred := credFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: toolnode mcp import [-a ADDR] FILE (a desktop client's config, with \"mcpServers\")")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	servers, err := upstream.Import(data)
	if err != nil {
		return err
	}
	if len(servers) == 0 {
		return fmt.Errorf("%s: no mcpServers to import", fs.Arg(0))
	}
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()
	for _, s := range servers {
		if err := write(fsys, "m/"+s.Name+".json", bytes.NewReader(s.JSON)); err != nil {
			return fmt.Errorf("m/%s.json: %w", s.Name, err)
		}
		needs := "no variables"
		if len(s.Needs) > 0 {
			needs = strings.Join(s.Needs, ", ")
		}
		fmt.Printf("m/%s.json published; a host runs it where it has %s\n", s.Name, needs)
		for _, n := range s.Notes {
			fmt.Printf("  note: %s\n", n)
		}
	}
	return nil
}
