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
  toolnode keygen                          print a new gossip key
  toolnode tls ca [-dir D] [-days N]       make a CA: toolnode-ca.pem, toolnode-ca-key.pem
  toolnode tls cert -node NAME [-host H,...] [-dir D] [-ca FILE -ca-key FILE] [-days N]
                                           make a node certificate: NAME.pem, NAME-key.pem
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
	case "keygen":
		err = keygen()
	case "tls":
		err = tlsCmd(args)
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
