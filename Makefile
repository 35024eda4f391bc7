# agent-worker — see README.md.
GO       ?= go
PKGS     ?= ./...
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run test deps check-large-files bench lint build tidy-check

## run: start the worker on its embedded default (demo agent, scripted model)
run:
	$(GO) run ./cmd/agent-worker run

## test: the whole suite, with the race detector (installs what it needs first).
## On a fresh machine e2e/tracing needs Jaeger built (minutes on two cores)
## into the user's cache directory: scripts/jaeger starts that in the
## background first, the test waits for it (-timeout 20m); later runs reuse it.
test: deps check-large-files
	@command -v flock >/dev/null 2>&1 && { ./scripts/jaeger >/dev/null 2>&1 & } || true
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## deps: what the tests need beyond Go (redis-server, promtool, chromium), from Debian's packages when missing; quiet when all is there
deps:
	@./scripts/deps

## check-large-files: no tracked file over 1 MiB (build outputs stay out of git)
check-large-files:
	@./scripts/check-large-files

## bench: benchmarks; each runs a fixed workload once and prints a table
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -count=1 $(PKGS)

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

## build: the binary, in bin/
build:
	$(GO) build -o bin/agent-worker ./cmd/agent-worker

## chaos: black-box fault scenarios against the built binary (real nats-server and redis-server on 127.0.0.1); prints a table, writes docs/RELIABILITY.md, exits non-zero if a message was lost, handled twice or dead-lettered. CHAOS_FLAGS="-run kill9" runs one.
.PHONY: chaos
chaos:
	$(GO) build -o bin/agent-worker ./cmd/agent-worker
	$(GO) build -o bin/nats-server github.com/nats-io/nats-server/v2
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "chaos: redis-server is not on PATH; installing Debian's redis-server"; \
		apt-get install -y redis-server || { apt-get update && apt-get install -y redis-server; }; \
	} || { echo "chaos: needs redis-server on PATH (Debian: apt-get install -y redis-server)"; exit 1; }
	$(GO) run ./chaos -bin bin/agent-worker -nats-server bin/nats-server -out docs/RELIABILITY.md $(CHAOS_FLAGS)

## soak: long randomized fault run against the built binary (3 replicas, a fault every 20–40 s); not run by CI or `make test`. SOAK_DURATION (default 10m), SOAK_STORE=redis|kv (default redis), SOAK_SEED (default: the time; printed) choose it. Prints tables, writes its section of docs/RELIABILITY.md, exits non-zero if a message was lost, handled twice, dead-lettered, or two replicas held one agent.
.PHONY: soak
soak:
	$(GO) build -o bin/agent-worker ./cmd/agent-worker
	$(GO) build -o bin/nats-server github.com/nats-io/nats-server/v2
	@command -v redis-server >/dev/null 2>&1 || [ "$(SOAK_STORE)" = kv ] || apt-get install -y redis-server \
		|| { echo "soak: needs redis-server on PATH (Debian: apt-get install -y redis-server)"; exit 1; }
	SOAK_SEED="$(SOAK_SEED)" SOAK_DURATION="$(SOAK_DURATION)" SOAK_STORE="$(SOAK_STORE)" \
		$(GO) run ./chaos -soak -bin bin/agent-worker -nats-server bin/nats-server -out docs/RELIABILITY.md $(SOAK_FLAGS)
