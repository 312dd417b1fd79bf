// Package storm measures retry amplification: how many requests a dead
// backend receives per logical request, for this library and for its Go
// peers (hashicorp/go-retryablehttp, failsafe-go's failsafehttp), each with
// its defaults. It is a module of its own so that the root module never
// depends on the peers.
//
// It also holds the peer benchmarks, for the same libraries and a bare
// transport: the happy path, the 503→200 retry path, 64 goroutines in
// parallel and the storm amplification (peers_bench_test.go), the happy GET
// with a circuit breaker, OTel metrics or hedging (features_bench_test.go)
// and a new destination host among many (newhost_bench_test.go).
// docs/performance.md has the latest tables, written by bench/perfdoc.sh
// (perfdoc_test.go, figures_test.go) and checked by TestPerformanceDocCounts.
//
// The module also holds cmd/proxylab, which drives the same libraries
// through real haproxy, nginx and caddy processes while their backends are
// killed and the proxy reloaded (bench/proxies/README.md).
//
// TestOpenLoopStorms (openloop_test.go) measures two storms of an open
// loop of GETs against a loopback host, for the defaults, full jitter
// without a budget and no retries: short connection-reset blips, and a
// host flapping between 400ms up and 200ms of 503s, in about a minute; its
// doc has the storms and the flags.
//
// Run the amplification tests with: cd bench/storm && go test -v ./...
// Run the open-loop storms with:
// cd bench/storm && go test -run TestOpenLoopStorms -count=1 -v .
// Run the benchmarks, with benchstat tables, with: bench/run.sh
// Count their instructions under callgrind with: bench/cost/run.sh
// Rewrite docs/performance.md with: bench/perfdoc.sh
// Run the proxies (installs them with apt-get) with: bench/proxies/run.sh
package storm
