package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/signing"
)

const trustUsage = "usage: toolnode trust [-a ADDR] [-key PRIVATEKEYFILE] add NAME PUBKEYFILE | ls | rm NAME"

// trust is `toolnode trust add|ls|rm`: a thin client of trust/ (DESIGN
// §8). add writes "NAME KEY-LINE" to trust/new, rm "remove NAME" to
// trust/ctl; with -key, the change's toolnode-trust-v1 manifest is signed
// with that private key and the armored signature follows the command
// in the same write (needed once a key is trusted).
func trust(args []string) error {
	fs := newFlagSet("trust", strings.TrimPrefix(trustUsage, "usage: toolnode "))
	addr := fs.String("a", defaultAddr(), "node 9P address")
	keyFile := fs.String("key", "", "OpenSSH private key file of a trusted key, to sign the change")
	cred := credFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New(trustUsage)
	}
	verb := fs.Arg(0)
	// Flags may also follow the verb: toolnode trust add -key K NAME FILE.
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return err
	}
	args = fs.Args()
	switch {
	case verb == "add" && len(args) == 2, verb == "ls" && len(args) == 0, verb == "rm" && len(args) == 1:
	case verb == "add" || verb == "ls" || verb == "rm":
		return errors.New(trustUsage)
	default:
		return fmt.Errorf("unknown trust verb %q\n%s", verb, trustUsage)
	}
	var signer *signing.Signer
	if *keyFile != "" {
		var err error
		if signer, err = signing.LoadSigner(*keyFile); err != nil {
			return err
		}
	}
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()
	switch verb {
	case "ls":
		return read(fsys, "trust/idx", os.Stdout)
	case "add":
		name := args[0]
		line, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		k, err := signing.ParseKey(name, line)
		if err != nil {
			return fmt.Errorf("%s: %v", args[1], err)
		}
		req := name + " " + k.Line() + "\n"
		if signer != nil {
			sig, err := signer.Sign(signing.Trust("add", name, k.Fingerprint))
			if err != nil {
				return err
			}
			req += string(sig)
		}
		out, err := request(fsys, "trust/new", req)
		if err != nil {
			return err
		}
		fmt.Print(string(out))
		return nil
	}
	name := args[0]
	fp, err := trustedFingerprint(fsys, name)
	if err != nil {
		return err
	}
	req := "remove " + name + "\n"
	if signer != nil {
		sig, err := signer.Sign(signing.Trust("remove", name, fp))
		if err != nil {
			return err
		}
		req += string(sig)
	}
	if err := tell(fsys, "trust/ctl", req); err != nil {
		return err
	}
	fmt.Printf("removed %s %s\n", name, fp)
	return nil
}

// trustedFingerprint is the fingerprint trust/idx lists for name.
func trustedFingerprint(fsys *client.Fsys, name string) (string, error) {
	var buf bytes.Buffer
	if err := read(fsys, "trust/idx", &buf); err != nil {
		return "", err
	}
	for l := range strings.SplitSeq(buf.String(), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no trusted key %q (toolnode trust ls lists them)", name)
}

const manifestUsage = "usage: toolnode manifest NAME.meta [EXECUTABLE]"

// manifest is `toolnode manifest NAME.meta [EXECUTABLE]`: it prints the
// toolnode-tool-v1 manifest a publish of that tool is signed over, for
// ssh-keygen -Y sign -n toolnode. The executable defaults to NAME beside
// NAME.meta when there is one.
func manifest(args []string) error {
	fs := newFlagSet("manifest", strings.TrimPrefix(manifestUsage, "usage: toolnode "))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, _, err := toolManifest(fs.Args(), manifestUsage)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(m)
	return err
}

const signUsage = "usage: toolnode sign -key PRIVATEKEYFILE NAME.meta [EXECUTABLE]"

// sign is `toolnode sign -key FILE NAME.meta [EXECUTABLE]`: it signs the
// tool's manifest and writes NAME.sig beside NAME.meta, where a tools
// directory publishes it, or to copy into t/ over 9P.
func sign(args []string) error {
	fs := newFlagSet("sign", strings.TrimPrefix(signUsage, "usage: toolnode "))
	keyFile := fs.String("key", "", "OpenSSH private key file (unencrypted; else sign the manifest with ssh-keygen -Y sign)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyFile == "" {
		return errors.New(signUsage)
	}
	signer, err := signing.LoadSigner(*keyFile)
	if err != nil {
		return err
	}
	m, metaPath, err := toolManifest(fs.Args(), signUsage)
	if err != nil {
		return err
	}
	sig, err := signer.Sign(m)
	if err != nil {
		return err
	}
	out := strings.TrimSuffix(metaPath, ".meta") + ".sig"
	if err := os.WriteFile(out, sig, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: signed by %s\n", out, signer.Fingerprint())
	return nil
}

// toolManifest reads NAME.meta [EXECUTABLE] and makes the tool's
// manifest; it returns the metadata file's path too.
func toolManifest(args []string, usage string) ([]byte, string, error) {
	if len(args) < 1 || len(args) > 2 || !strings.HasSuffix(args[0], ".meta") {
		return nil, "", errors.New(usage)
	}
	metaPath := args[0]
	name := strings.TrimSuffix(filepath.Base(metaPath), ".meta")
	meta, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, "", err
	}
	digest := ""
	if len(args) == 2 {
		b, err := os.ReadFile(args[1])
		if err != nil {
			return nil, "", err
		}
		digest = signing.Digest(b)
	} else if exe := strings.TrimSuffix(metaPath, ".meta"); isExecutable(exe) {
		// As a tools directory publishes it: the executable file beside.
		b, err := os.ReadFile(exe)
		if err != nil {
			return nil, "", err
		}
		digest = signing.Digest(b)
	}
	return signing.Tool(name, meta, digest), metaPath, nil
}

// isExecutable reports whether path is a regular file (a symlink
// followed) with an execute bit, as a tools directory's executable is.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
