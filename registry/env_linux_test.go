//go:build linux

package registry

import (
	"context"
	"strings"
	"testing"
)

// A sandboxed tool's environment is the allow-list (sandbox.EnvAllowed)
// and ToolEnv; under Yolo (the control) it is the node's whole
// environment.
func TestEscape_Environment(t *testing.T) {
	env := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/u", "USER=u", "LOGNAME=u", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TERM=dumb",
		"OLLIE_TOOLS_PATH=/t", "TOOLNODE_GOSSIP_KEY=gossip-sekrit", "TOOLNODE_TOKEN=token-sekrit",
		"AWS_SECRET_ACCESS_KEY=aws-sekrit", "EXTRA_OK=passed", "EXTRA_NO=kept-back", "GH_A=1", "GH_B=2",
	}
	mod := func(c *RunnerConfig) {
		c.Env = env
		c.ToolEnv = []string{"EXTRA_OK", "GH_*"}
	}
	sb := newTestRunner(t, mod)
	yolo := newTestRunner(t, func(c *RunnerConfig) { mod(c); c.Yolo = true })
	leak := Invocation{Tool: "probe", Meta: shTool(`env | grep -e sekrit -e kept-back`)}
	out, err := yolo.Run(context.Background(), leak)
	if err != nil {
		t.Fatalf("control (-yolo): the probe failed, so the test would pass vacuously: %v", err)
	}
	control := string(out)
	if got, err := sb.Run(context.Background(), leak); err == nil {
		t.Fatalf("sandboxed: the node's secrets reached the tool: %q", got)
	}
	for _, s := range []string{"gossip-sekrit", "token-sekrit", "aws-sekrit", "kept-back"} {
		if !strings.Contains(control, s) {
			t.Errorf("control: %s not in the yolo environment %q", s, control)
		}
	}
	if out, err = sb.Run(context.Background(), Invocation{Tool: "probe", Meta: shTool(`env`)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "USER=u", "LOGNAME=u", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TERM=dumb",
		"OLLIE_TOOLS_PATH=/t", "EXTRA_OK=passed", "GH_A=1", "GH_B=2", "TOOLNODE_NODE=node-a", "OLLIE_SESSION_ID=", "TMPDIR="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("sandboxed environment lacks %s: %q", want, out)
		}
	}
	if strings.Contains(string(out), "sekrit") || strings.Contains(string(out), "kept-back") {
		t.Errorf("sandboxed environment leaks: %q", out)
	}
}
