//go:build !linux

package sandbox

import (
	"fmt"
	"runtime"
)

// Status reports that tools cannot be sandboxed: the sandbox is
// Landlock, which only Linux has.
func Status() (abi int, err error) {
	return 0, fmt.Errorf("%w: the sandbox uses Linux Landlock, and this host runs %s", ErrNoSandbox, runtime.GOOS)
}

// fsView would be the read half of the sandbox; there is none here.
type fsView struct{}

func newFSView([]string) *fsView { return &fsView{} }

func (*fsView) protects(string) bool      { return false }
func (*fsView) grants(string) bool        { return false }
func (*fsView) tree(string, bool) *fsView { return &fsView{} }
func (*fsView) close()                    {}

func prepareThread() error {
	_, err := Status()
	return err
}

func restrictThread(*sandboxSpec) error {
	_, err := Status()
	return err
}

// Info says what protects the tools of s: nothing here.
func (s *Sandbox) Info() []string {
	if s.cfg.Off {
		return []string{"off (-yolo)"}
	}
	_, err := kernelSandbox()
	return []string{"unavailable: " + err.Error()}
}

// HideEnviron does nothing off Linux: there is no sandbox to protect.
func HideEnviron() error { return nil }
