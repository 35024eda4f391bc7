package redisstore_test

import "syscall"

// childProcAttr makes a redis-server die with the test binary, even when a
// test times out and the binary panics before TestMain can stop it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
