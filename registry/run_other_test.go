//go:build !linux

package registry

import "errors"

func viewFDs(*Runner) int { return 0 }

func ptraceSeize(int) error { return errors.ErrUnsupported }

func connectMPTCP(string) error { return errors.ErrUnsupported }
