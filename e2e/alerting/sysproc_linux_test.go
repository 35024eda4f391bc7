package alerting

import "syscall"

// sysProcAttr makes a child die with the test process, so a crashed or
// killed test run leaves no prometheus or alertmanager behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
