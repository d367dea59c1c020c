//go:build !linux

package calls

// kernelFSOf is Linux's alone: elsewhere only the paths of kernelDirs are
// refused.
func kernelFSOf(string) string { return "" }
