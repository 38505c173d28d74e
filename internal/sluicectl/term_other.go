//go:build !linux

package sluicectl

import "os"

// fileIsTerminal reports whether f is a character device, which is as close
// to "a terminal" as the standard library tells outside Linux.
func fileIsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// rawInput leaves the terminal as it is outside Linux: q then Enter quits
// top, as does Ctrl-C.
func rawInput(*os.File) (restore func()) { return func() {} }
