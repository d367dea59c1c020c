// Command toolnode runs a node of the toolnode registry, and is also a
// small 9P client for it. See README.md.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
)

const usage = `usage:
  toolnode [serve] [flags]                 run a node (toolnode serve -h lists the flags)
  toolnode 9p [-a ADDR] ls|read|write|rdwr PATH
  toolnode 9p ADDR ls|read|write|rdwr PATH a small 9P client, like plan9port's 9p
  toolnode call [-a ADDR] [-session S -agent A] NAME [JSON]
  toolnode proxy [-listen ADDR] -to ADDR [-tls-ca FILE] [-token T]
                                           plain 9P on loopback, forwarded to a node (TLS, token)
  (9p, call: -tls-ca FILE or $TOOLNODE_CA for 9P over TLS; -token T or $TOOLNODE_TOKEN)
  toolnode mcp [-a ADDR] [-profile P]     an MCP server on stdin/stdout for one agent
  toolnode token [-a ADDR] [-data DIR] new -role ROLE NAME | ls | revoke NAME
  toolnode keygen                          print a new gossip key
`

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && (args[0] == "" || args[0][0] != '-') {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "9p":
		err = ninep(args)
	case "call":
		err = call(args)
	case "proxy":
		err = proxy(args)
	case "mcp":
		err = mcpStdio(args)
	case "token":
		err = token(args)
	case "keygen":
		err = keygen()
	case "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "toolnode: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "toolnode %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func keygen() error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	fmt.Println(base64.StdEncoding.EncodeToString(key))
	return nil
}
