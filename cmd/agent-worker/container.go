package main

import (
	"fmt"
	"net"
	"os"

	"github.com/agent-worker/agent-worker/config"
)

// inContainer reports whether this process seems to run in a container:
// Docker's /.dockerenv, Podman's /run/.containerenv, or the container
// variable that Podman, systemd-nspawn and LXC set.
func inContainer() bool {
	for _, marker := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(marker); err == nil {
			return true
		}
	}
	_, ok := os.LookupEnv("container")
	return ok
}

// containerNotice is what run without --config says in a container when
// the operator API listens at addr on loopback (no AGENT_WORKER_API_TOKEN,
// so no token and no 0.0.0.0): nothing outside the container can reach
// it, and how to change that. "" when the API is reachable or has tokens.
func containerNotice(cfg *config.Config, addr string) string {
	if len(cfg.API.Tokens) > 0 {
		return ""
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return ""
	}
	return fmt.Sprintf("running in a container: the operator API listens on %s, reachable only from inside the container; "+
		"set %s to a secret to serve it on %s with that token (docker run -e %s=... -p 8080:8080)",
		addr, config.EnvAPIToken, config.ContainerAPIListen, config.EnvAPIToken)
}
