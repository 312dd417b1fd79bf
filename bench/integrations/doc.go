// Package integrations tests retryhttp inside the clients and wrappers Go
// services use with it: golang.org/x/net/http2 over h2c, resty, the AWS
// SDK for Go v2. It is a module of its own so that their dependencies never
// reach the core's go.mod. Its tests run with
//
//	cd bench/integrations && go test -race -count=1 ./...
//
// and BenchmarkStreamedBodyFirstByte compares the time to first byte of a
// streamed request body at the server, through the transport and through
// bare net/http (docs/integrations.md gives the figures).
package integrations
