//go:build !linux

package alerting

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's; the
// cleanup still stops the children when the test ends normally.
func sysProcAttr() *syscall.SysProcAttr { return nil }
