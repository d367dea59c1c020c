// Command metafloor is the floor of the start benchmark: a process that
// reads and parses every .meta file of a directory, as a node must at
// start, and nothing else. It prints how many it parsed.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: metafloor DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	ents, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".meta") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", e.Name(), err)
			os.Exit(1)
		}
		n++
	}
	fmt.Println(n)
}
