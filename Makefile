# kiln build and test entry points. `make test` is what CI runs (.ci/run).
GO ?= go
BIN := bin/kiln

.PHONY: all build test unit e2e lint cluster node-image clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/kiln

unit:
	$(GO) vet ./...
	$(GO) test ./...

test: unit

clean:
	rm -rf bin

# Builds (or reuses from the kiln cache) the local platform's node image.
# Needs root and Go; a cold build takes tens of minutes (docs/node-image.md).
node-image: build
	$(BIN) build node-image
