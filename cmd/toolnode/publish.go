package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/signing"
)

const publishUsage = "usage: toolnode publish [-a ADDR] [-key PRIVATEKEYFILE] [-canary NODE[,NODE]] NAME.meta [EXECUTABLE]"

// publish is `toolnode publish [-key FILE] NAME.meta [EXECUTABLE]`: a
// thin client of t/ (DESIGN §8). It writes t/NAME.sig (with -key: the
// signature over the tool's manifest), t/NAME (when an executable is
// given; mode 0755) and t/NAME.meta through one attach, then reads
// v/NAME/idx and prints the version the publish made, or that it made
// none. Without an executable the tool keeps its live one, and -key
// signs the manifest over that one's digest. With -canary it first
// writes "canary NODES" to v/NAME/ctl on the same attach, so the publish
// is live only on those nodes until it is promoted or aborted.
func publish(args []string) error {
	fs := newFlagSet("publish", strings.TrimPrefix(publishUsage, "usage: toolnode "))
	addr := fs.String("a", defaultAddr(), "node 9P address")
	keyFile := fs.String("key", "", "OpenSSH private key file (unencrypted) of a trusted key, to sign the publish (needed once a key is trusted)")
	canary := fs.String("canary", "", "make the publish a canary live only on these nodes (NODE[,NODE]) until toolnode tool promote or abort")
	cred := credFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *canary != "" && strings.ContainsAny(*canary, " \t\n") {
		return fmt.Errorf("invalid -canary %q: NODE[,NODE], no spaces", *canary)
	}
	args = fs.Args()
	if len(args) < 1 || len(args) > 2 || !strings.HasSuffix(args[0], ".meta") {
		return errors.New(publishUsage)
	}
	metaPath := args[0]
	name := strings.TrimSuffix(filepath.Base(metaPath), ".meta")
	if err := registry.ValidName(name); err != nil {
		return fmt.Errorf("%s: %v", metaPath, err)
	}
	meta, err := os.ReadFile(metaPath)
	if err != nil {
		return err
	}
	// A close of t/NAME.meta publishes the document without the white
	// space around it: that is what is signed and compared.
	meta = bytes.TrimSpace(meta)
	if len(meta) == 0 {
		return fmt.Errorf("%s is empty: a tool's metadata is a JSON object (DESIGN §1)", metaPath)
	}
	var exe []byte
	if len(args) == 2 {
		if exe, err = os.ReadFile(args[1]); err != nil {
			return err
		}
		if len(exe) == 0 {
			return fmt.Errorf("%s is empty: an executable needs content", args[1])
		}
	}
	var signer *signing.Signer
	if *keyFile != "" {
		if signer, err = signing.LoadSigner(*keyFile); err != nil {
			return err
		}
	}
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()

	before, err := idxIfAny(fsys, name)
	if err != nil {
		return err
	}
	if _, _, perr := registry.ParseMeta(meta); perr != nil {
		// The node refuses it and says why; the executable is not sent,
		// so the refusal leaves the tool as it was.
		if err := write(fsys, "t/"+name+".meta", bytes.NewReader(meta)); err != nil {
			return err
		}
		return fmt.Errorf("%s does not parse here (%v), yet the node took it; the executable was not sent", metaPath, perr)
	}
	if *canary != "" {
		if err := tell(fsys, "v/"+name+"/ctl", "canary "+*canary); err != nil {
			return err
		}
	}
	var sig []byte
	if signer != nil {
		digest := ""
		if exe != nil {
			digest = signing.Digest(exe)
		} else if live := liveLine(before); live != nil && live[4] != "-" {
			digest = live[4]
		}
		if sig, err = signer.Sign(signing.Tool(name, meta, digest)); err != nil {
			return err
		}
	}
	// The signature is attached to the next publish of the tool by this
	// principal: written before the executable, whose close stages it
	// for the metadata's when the signature covers both, and again
	// before the metadata, whose close publishes.
	attach := func() error {
		if sig == nil {
			return nil
		}
		return write(fsys, "t/"+name+".sig", bytes.NewReader(sig))
	}
	if exe != nil {
		if err := attach(); err != nil {
			return err
		}
		if err := write(fsys, "t/"+name, bytes.NewReader(exe)); err != nil {
			return err
		}
	}
	if err := attach(); err != nil {
		return err
	}
	if err := write(fsys, "t/"+name+".meta", bytes.NewReader(meta)); err != nil {
		return err
	}
	after, err := idxIfAny(fsys, name)
	if err != nil {
		return err
	}
	report := publishReport(name, before, after)
	if *canary != "" {
		if newest(after) > newest(before) {
			report += " on " + *canary
		} else {
			report += "; the canary on " + *canary + " waits for the next publish (toolnode tool abort " + name + " drops it)"
		}
	}
	fmt.Println(report)
	return nil
}

// idxIfAny is readIdx with no versions for a tool the cluster has none
// of.
func idxIfAny(fsys *client.Fsys, name string) ([][]string, error) {
	idx, err := readIdx(fsys, name)
	if err != nil && strings.HasPrefix(err.Error(), "no versions of tool") {
		return nil, nil
	}
	return idx, err
}

// liveLine is the idx line of the live version, or nil.
func liveLine(idx [][]string) []string {
	for _, l := range idx {
		if len(l) == 6 && l[1] == "live" {
			return l
		}
	}
	return nil
}

// newest is the number of the newest version an idx lists (0: none).
func newest(idx [][]string) uint64 {
	if len(idx) == 0 {
		return 0
	}
	n, _ := strconv.ParseUint(idx[0][0], 10, 64)
	return n
}

// publishReport says what a publish made of the tool, from v/NAME/idx
// before and after it: the versions made, newest last, and the state and
// signer of the newest, or that none was made.
func publishReport(name string, before, after [][]string) string {
	old := newest(before)
	var made [][]string
	for i := len(after) - 1; i >= 0; i-- {
		if n, err := strconv.ParseUint(after[i][0], 10, 64); err == nil && n > old && len(after[i]) > 1 {
			made = append(made, after[i])
		}
	}
	switch len(made) {
	case 0:
		if live := liveLine(after); live != nil {
			return fmt.Sprintf("%s: no new version: identical to the live one (version %s)", name, live[0])
		}
		return fmt.Sprintf("%s: no new version: identical to the live one", name)
	case 1:
		return fmt.Sprintf("%s: version %s, %s%s", name, made[0][0], made[0][1], signedBy(made[0]))
	}
	nums := make([]string, len(made))
	for i, l := range made {
		nums[i] = l[0]
	}
	last := made[len(made)-1]
	// The executable and the metadata are one version; more are other
	// publishes of the tool that landed in between.
	return fmt.Sprintf("%s: versions %s; version %s is %s%s", name, strings.Join(nums, " and "), last[0], last[1], signedBy(last))
}

// signedBy names an idx line's signer, if it has one.
func signedBy(l []string) string {
	if len(l) == 6 && l[5] != "-" {
		return ", signed by " + l[5]
	}
	return ""
}
