package registry

import (
	"errors"
	"testing"
)

// "network" is a top-level boolean, default false (DESIGN §1).
func TestParseMeta_Network(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want bool
	}{
		{`{"description":"x"}`, false},
		{`{"network":false}`, false},
		{`{"network":true}`, true},
		{`{"network":null}`, false},
		// A variant does not widen it.
		{`{"variants":[{"match":{"os":"linux"},"network":true}]}`, false},
	} {
		m, _, err := ParseMeta([]byte(tc.meta))
		if err != nil || m.Network != tc.want {
			t.Errorf("%s: network %v, %v; want %v", tc.meta, m != nil && m.Network, err, tc.want)
		}
	}
	if _, _, err := ParseMeta([]byte(`{"network":"yes"}`)); !errors.Is(err, ErrInvalidMeta) {
		t.Errorf(`"network":"yes": %v, want invalid`, err)
	}
}
