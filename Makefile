# agent-worker — see README.md.
GO       ?= go
PKGS     ?= ./...
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run test bench lint build tidy-check

## run: start the worker on its embedded default (demo agent, scripted model)
run:
	$(GO) run ./cmd/agent-worker run

## test: the whole suite, with the race detector
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)

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
