package registry

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// The JSON Schema library compiles its meta-schemas at the first compile,
// not at package init (third_party/jsonschema/TOOLNODE.md): every node
// links it, and most compile no schema for a long time. Upstream's init
// allocates 1.7 MB; this test binary, started again with Go's init trace,
// must show the package's init allocating almost nothing.
func TestSchemaLibraryInitIsCheap(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := regexp.MustCompile(`init github.com/santhosh-tekuri/jsonschema/v6 @[^,]*, [^,]*, (\d+) bytes`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init line of the library in:\n%s", out)
	}
	if b, _ := strconv.Atoi(string(m[1])); b > 100_000 {
		t.Fatalf("the library's init allocates %d bytes: it compiles its meta-schemas at init again", b)
	}
	// It still compiles them when needed.
	if _, err := compileSchema([]byte(`{"type":"object","properties":{"a":{"minLength":-1}}}`)); err == nil {
		t.Fatal("a schema the meta-schema refuses compiled")
	}
}
