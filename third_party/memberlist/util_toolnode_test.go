package memberlist

// toolnode: tests of the shared msgpack handles (util.go). Upstream's
// tests are left out of this copy; run these with `go test` in this
// directory.

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

func testAlive(i int) alive {
	return alive{
		Incarnation: uint32(i), Node: fmt.Sprintf("n%d", i),
		Addr: []byte{127, 0, 0, 1}, Port: uint16(7946 + i),
		Meta: []byte(`{"c":"127.0.0.1:7000","p":"127.0.0.1:5640","s":true}`),
		Vsn:  []uint8{1, 5, 2, 2, 5, 4},
	}
}

// The shared handles encode what upstream's per-message handles did, byte
// for byte, in both time formats, and decode it back; from many
// goroutines at once (run with -race).
func TestSharedHandlesMatchFreshOnes(t *testing.T) {
	type timed struct {
		When time.Time
		A    alive
	}
	fresh := func(newTime bool, in any) []byte {
		var buf bytes.Buffer
		buf.WriteByte(uint8(aliveMsg))
		hd := codec.MsgpackHandle{}
		hd.TimeNotBuiltin = !newTime
		if err := codec.NewEncoder(&buf, &hd).Encode(in); err != nil {
			t.Error(err)
		}
		return buf.Bytes()
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				in := timed{When: time.Unix(int64(1e9+i), 0).UTC(), A: testAlive(g*1000 + i)}
				for _, newTime := range []bool{true, false} {
					got, err := encode(aliveMsg, &in, newTime)
					if err != nil {
						t.Error(err)
						return
					}
					if want := fresh(newTime, &in); !bytes.Equal(got.Bytes(), want) {
						t.Errorf("newTime=%v: shared handle encoded %x, a fresh one %x", newTime, got.Bytes(), want)
						return
					}
					var out timed
					if err := decode(got.Bytes()[1:], &out); err != nil {
						t.Error(err)
						return
					}
					if !reflect.DeepEqual(out.A, in.A) || !out.When.Equal(in.When) {
						t.Errorf("decoded %+v, want %+v", out, in)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkDecodeAlive decodes an alive message with the shared handle
// (this copy) and with a handle made for the message (upstream's), legs
// alternating in one run.
func BenchmarkDecodeAlive(b *testing.B) {
	a := testAlive(42)
	buf, err := encode(aliveMsg, &a, true)
	if err != nil {
		b.Fatal(err)
	}
	msg := buf.Bytes()[1:]
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var out alive
			if err := decode(msg, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("upstream", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var out alive
			hd := codec.MsgpackHandle{}
			if err := codec.NewDecoder(bytes.NewReader(msg), &hd).Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
