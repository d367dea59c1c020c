//go:build !linux

package sandbox

import "errors"

func viewFDs(*testSandbox) int { return 0 }

func ptraceSeize(int) error { return errors.ErrUnsupported }

func connectMPTCP(string) error { return errors.ErrUnsupported }
