package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolnode/toolnode/tlsutil"
)

// tlsCmd makes certificates, as `consul tls ca create` and `consul tls
// cert create` do: a CA, then a certificate per node signed by it, usable
// for -tls-cert/-tls-key/-tls-ca and -9p-tls-cert/-9p-tls-key; with
// -client, one whose node is never a server.
func tlsCmd(args []string) error {
	const usage = "usage: toolnode tls ca [-dir D] [-days N] | toolnode tls cert -node NAME [-client] [-host H,...] [-dir D] [-ca FILE] [-ca-key FILE] [-days N]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(os.Stderr, usage+"\n(toolnode tls ca -h and toolnode tls cert -h list the flags)")
		return flag.ErrHelp
	case "ca":
		fs := newFlagSet("tls ca", "tls ca [-dir D] [-days N]")
		dir := fs.String("dir", ".", "directory to write "+tlsutil.CAFile+" and "+tlsutil.CAKeyFile+" into")
		days := fs.Int("days", tlsutil.DefaultCADays, "days the CA is valid")
		if err := parseAll(fs, args[1:]); err != nil {
			return err
		}
		cert, key, err := tlsutil.CreateCA(*dir, *days)
		if err != nil {
			return err
		}
		fmt.Printf("==> CA certificate %s\n==> CA key %s (keep it secret; nodes need only the certificate)\n", cert, key)
		return nil
	case "cert":
		fs := newFlagSet("tls cert", "tls cert -node NAME [-client] [-host H,...] [-dir D] [-ca FILE] [-ca-key FILE] [-days N]")
		node := fs.String("node", "", "node name (required): the certificate's name and file name")
		hosts := fs.String("host", "", "more names the node is reached by: IP addresses or DNS names, comma-separated")
		dir := fs.String("dir", ".", "directory to write NAME.pem and NAME-key.pem into (and where the CA is by default)")
		ca := fs.String("ca", "", "CA certificate (default DIR/"+tlsutil.CAFile+")")
		caKey := fs.String("ca-key", "", "CA key (default DIR/"+tlsutil.CAKeyFile+")")
		days := fs.Int("days", tlsutil.DefaultCertDays, "days the certificate is valid")
		client := fs.Bool("client", false, "a client node's certificate: its node follows the cluster, forwards writes and runs routed calls, but is never a server (no Raft, no vote, no change stream served)")
		if err := parseAll(fs, args[1:]); err != nil {
			return err
		}
		if *ca == "" {
			*ca = filepath.Join(*dir, tlsutil.CAFile)
		}
		if *caKey == "" {
			*caKey = filepath.Join(*dir, tlsutil.CAKeyFile)
		}
		var hs []string
		if *hosts != "" {
			hs = strings.Split(*hosts, ",")
		}
		cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{
			Node: *node, Hosts: hs, Days: *days, CA: *ca, CAKey: *caKey, OutDir: *dir, Client: *client,
		})
		if err != nil {
			return err
		}
		role := ""
		if *client {
			role = " (a client node's: it is never a server)"
		}
		fmt.Printf("==> certificate %s%s\n==> key %s\n", cert, role, key)
		return nil
	default:
		return fmt.Errorf("unknown tls command %q: want ca or cert", args[0])
	}
}

func parseAll(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
