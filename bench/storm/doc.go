// Package storm measures retry amplification: how many requests a dead
// backend receives per logical request, for this library and for its Go
// peers (hashicorp/go-retryablehttp, failsafe-go's failsafehttp), each with
// its defaults. It is a module of its own so that the root module never
// depends on the peers.
//
// Run it with: cd bench/storm && go test -v ./...
package storm
