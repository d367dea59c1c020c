package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolnode/toolnode/node"
)

const tokenUsage = "usage: toolnode token [-a ADDR] [-data DIR] new -role ROLE [-tools PATTERN,...] NAME | ls | revoke NAME"

// token is `toolnode token new -role ROLE NAME | ls | revoke NAME`: it
// speaks 9P to the node's token/ files, as $TOOLNODE_TOKEN or, without
// it, with the node's own admin token from DIR/admin.token.
func token(args []string) error {
	fs := newFlagSet("token", strings.TrimPrefix(tokenUsage, "usage: toolnode "))
	addr := fs.String("a", defaultAddr(), "node 9P address")
	data := fs.String("data", dataDefault(), "the node's data dir, whose admin.token is used when $TOOLNODE_TOKEN is not set")
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return errors.New(tokenUsage)
	}
	verb, args := args[0], args[1:]
	synopsis, ok := map[string]string{"new": "new -role ROLE [-tools PATTERN,...] NAME", "ls": "ls", "revoke": "revoke NAME"}[verb]
	if !ok {
		return fmt.Errorf("unknown token verb %q\n%s", verb, tokenUsage)
	}
	var role, tools string
	vfs := newFlagSet("token "+verb, "token [-a ADDR] [-data DIR] "+synopsis)
	if verb == "new" {
		vfs.StringVar(&role, "role", "", "read, call, publish or admin")
		vfs.StringVar(&tools, "tools", "", "limit the token to these tools (glob patterns, comma-separated)")
	}
	if err := vfs.Parse(args); err != nil {
		return err
	}
	args = vfs.Args()
	if verb == "new" {
		if role == "" || len(args) != 1 {
			return errors.New("usage: toolnode token new -role ROLE NAME (ROLE: read, call, publish or admin)")
		}
	}
	if verb == "ls" && len(args) != 0 || verb == "revoke" && len(args) != 1 {
		return errors.New(tokenUsage)
	}
	secret, err := adminSecret(*data)
	if err != nil {
		return err
	}
	fsys, err := mount(*addr, secret)
	if err != nil {
		return err
	}
	defer fsys.Close()
	switch verb {
	case "new":
		spec := "name=" + args[0] + " role=" + role
		if tools != "" {
			spec += " tools=" + tools
		}
		out, err := request(fsys, "token/new", spec)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	case "ls":
		return read(fsys, "token/idx", os.Stdout)
	default:
		return tell(fsys, "token/ctl", "revoke "+args[0])
	}
}

// adminSecret is $TOOLNODE_TOKEN, else the node's admin token from its
// data directory, else "" (a token-less attach, refused by default).
func adminSecret(data string) (string, error) {
	if t := os.Getenv("TOOLNODE_TOKEN"); t != "" {
		return t, nil
	}
	path := filepath.Join(data, node.AdminTokenFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the admin token: %w (set $TOOLNODE_TOKEN, or give the node's -data)", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("reading the admin token %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
