package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"9fans.net/go/plan9/client"
)

const toolUsage = "usage: toolnode tool [-a ADDR] versions NAME | rollback NAME VERSION | canary [-manual] NAME NODE[,NODE] | promote NAME | abort NAME"

// tool is `toolnode tool versions NAME | rollback NAME VERSION | canary
// NAME NODES | promote NAME | abort NAME`: a thin client of v/NAME/
// (DESIGN §8). versions prints v/NAME/idx as a table; rollback writes
// "rollback VERSION" to v/NAME/ctl and prints the version it made live;
// canary, promote and abort write their line to v/NAME/ctl.
func tool(args []string) error {
	fs := newFlagSet("tool", strings.TrimPrefix(toolUsage, "usage: toolnode "))
	addr := fs.String("a", defaultAddr(), "node 9P address")
	cred := credFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return errors.New(toolUsage)
	}
	verb, args := args[0], args[1:]
	manual := false
	if verb == "canary" && len(args) > 0 && (args[0] == "-manual" || args[0] == "--manual") {
		manual, args = true, args[1:]
	}
	switch {
	case verb == "versions" && len(args) == 1, verb == "rollback" && len(args) == 2,
		verb == "canary" && len(args) == 2, (verb == "promote" || verb == "abort") && len(args) == 1:
	case verb == "versions" || verb == "rollback" || verb == "canary" || verb == "promote" || verb == "abort":
		return errors.New(toolUsage)
	default:
		return fmt.Errorf("unknown tool verb %q\n%s", verb, toolUsage)
	}
	name := args[0]
	if name == "" || strings.ContainsAny(name, "/ \t\n") {
		return fmt.Errorf("invalid tool name %q", name)
	}
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()
	switch verb {
	case "versions":
		return versionsTable(fsys, name, os.Stdout)
	case "canary", "promote", "abort":
		return canaryVerb(fsys, verb, name, args[1:], manual)
	}
	if _, err := strconv.ParseUint(args[1], 10, 64); err != nil {
		return fmt.Errorf("invalid version %q: a version is a number that toolnode tool versions %s lists", args[1], name)
	}
	if err := tell(fsys, "v/"+name+"/ctl", "rollback "+args[1]); err != nil {
		return err
	}
	idx, err := readIdx(fsys, name)
	if err != nil {
		return err
	}
	for _, l := range idx {
		if len(l) > 1 && l[1] == "live" {
			fmt.Printf("%s: rolled back to version %s, live as version %s\n", name, args[1], l[0])
			return nil
		}
	}
	fmt.Printf("%s: rolled back to version %s\n", name, args[1])
	return nil
}

// canaryVerb writes a canary, promote or abort line to v/NAME/ctl and
// says what it did.
func canaryVerb(fsys *client.Fsys, verb, name string, args []string, manual bool) error {
	line := verb
	if verb == "canary" {
		if args[0] == "" || strings.ContainsAny(args[0], " \t\n") {
			return fmt.Errorf("invalid canary nodes %q: NODE[,NODE], no spaces", args[0])
		}
		line += " " + args[0]
		if manual {
			line += " manual"
		}
	}
	if err := tell(fsys, "v/"+name+"/ctl", line); err != nil {
		return err
	}
	switch verb {
	case "canary":
		fmt.Printf("%s: the next publish is a canary on %s\n", name, args[0])
	case "promote":
		idx, err := readIdx(fsys, name)
		if err != nil {
			return err
		}
		for _, l := range idx {
			if len(l) > 1 && l[1] == "live" {
				fmt.Printf("%s: canary promoted, live everywhere as version %s\n", name, l[0])
				return nil
			}
		}
		fmt.Printf("%s: canary promoted\n", name)
	default:
		fmt.Printf("%s: canary aborted\n", name)
	}
	return nil
}

// readIdx reads v/NAME/idx, one slice of fields a line.
func readIdx(fsys *client.Fsys, name string) ([][]string, error) {
	var buf bytes.Buffer
	if err := read(fsys, "v/"+name+"/idx", &buf); err != nil {
		if strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "does not exist") {
			return nil, fmt.Errorf("no versions of tool %q in the cluster", name)
		}
		return nil, err
	}
	var out [][]string
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			out = append(out, f)
		}
	}
	return out, sc.Err()
}

// versionsTable prints v/NAME/idx with a header, in aligned columns, the
// digest shortened to 12 digits.
func versionsTable(fsys *client.Fsys, name string, out io.Writer) error {
	idx, err := readIdx(fsys, name)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tPUBLISHER\tTIME\tDIGEST\tSIGNER")
	for _, f := range idx {
		if len(f) == 6 && len(f[4]) > 12 {
			f[4] = f[4][:12]
		}
		fmt.Fprintln(tw, strings.Join(f, "\t"))
	}
	return tw.Flush()
}
