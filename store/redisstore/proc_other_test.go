//go:build !linux

package redisstore_test

import "syscall"

func childProcAttr() *syscall.SysProcAttr { return nil }
