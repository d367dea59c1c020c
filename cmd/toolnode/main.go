// Command toolnode runs a node of the toolnode registry, and is also a
// small 9P client for it. See README.md.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage:
  toolnode [serve] [flags]                 run a node (toolnode serve -h lists the flags)
  toolnode 9p [-a ADDR | ADDR] VERB PATH  a small 9P client, like plan9port's 9p; VERB is
                                           ls [-l], stat, read, write (creates), rdwr, create or rm
  toolnode call [-a ADDR] [-session S -agent A] NAME [JSON]
  toolnode proxy [-listen ADDR] -to ADDR [-tls-ca FILE] [-token T]
                                           plain 9P on loopback, forwarded to a node (TLS, token)
  (9p, call: -tls-ca FILE or $TOOLNODE_CA for 9P over TLS; -token T or $TOOLNODE_TOKEN)
  toolnode mcp [-a ADDR] [-profile P]     an MCP server on stdin/stdout for one agent
  toolnode token [-a ADDR] [-data DIR] new -role ROLE NAME | ls | revoke NAME
  toolnode publish [-a ADDR] [-key PRIVATEKEYFILE] [-canary NODE[,NODE]] NAME.meta [EXECUTABLE]
                                           publish a tool (t/NAME.meta, t/NAME, signed with -key)
                                           and print the version it made
  toolnode tool [-a ADDR] versions NAME   a tool's kept versions (v/NAME/idx) as a table
  toolnode tool [-a ADDR] rollback NAME VERSION
                                           publish a copy of a kept version as the next one
  toolnode tool [-a ADDR] canary [-manual] NAME NODE[,NODE]
                                           make the tool's next publish live only on those nodes
  toolnode tool [-a ADDR] promote NAME | abort NAME
                                           make the canary live everywhere, or drop it
  toolnode trust [-a ADDR] [-key PRIVATEKEYFILE] add NAME PUBKEYFILE | ls | rm NAME
                                           the publisher keys signatures are checked against
  toolnode manifest NAME.meta [EXECUTABLE] print the manifest a publish is signed over
  toolnode sign -key PRIVATEKEYFILE NAME.meta [EXECUTABLE]
                                           write NAME.sig beside NAME.meta
  toolnode keygen                          print a new gossip key
  toolnode version                         the module version, commit and Go version of this binary
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
	case "proxy":
		err = proxy(args)
	case "mcp":
		err = mcpStdio(args)
	case "token":
		err = token(args)
	case "publish":
		err = publish(args)
	case "tool":
		err = tool(args)
	case "trust":
		err = trust(args)
	case "manifest":
		err = manifest(args)
	case "sign":
		err = sign(args)
	case "keygen":
		err = keygen(args)
	case "version":
		err = version(args)
	case "tls":
		err = tlsCmd(args)
	case "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "toolnode: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0) // the flag set printed the usage
	case errors.Is(err, errUsage):
		os.Exit(2) // the flag set printed the error and the usage
	case errors.Is(err, errReported):
		os.Exit(1)
	default:
		fmt.Fprintf(os.Stderr, "toolnode %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// errReported is returned by a command that has reported its error
// itself (a node logs it); main only sets the exit status.
var errReported = errors.New("reported")

// errUsage is a command line the flag set refused; it has said why.
var errUsage = errors.New("usage")

// parseFlags parses args with fs (flag.ContinueOnError), which prints
// its own error and usage; main then adds nothing.
func parseFlags(fs *flag.FlagSet, args []string) error {
	switch err := fs.Parse(args); {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return err
	default:
		return errUsage
	}
}

// newFlagSet is the flag set of a subcommand: its -h prints the
// synopsis, then every flag with its default.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toolnode %s\n", synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "flags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func keygen(args []string) error {
	fs := newFlagSet("keygen", "keygen (prints a new gossip key: 32 random bytes, base64)")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	fmt.Println(base64.StdEncoding.EncodeToString(key))
	return nil
}
