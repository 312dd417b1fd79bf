package destinations

import (
	"fmt"
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/doccheck"
	"github.com/seed2409de8f/retryhttp/internal/tail"
)

// TestDocNumbers holds every number in the doc comments of the package's
// exported API to the value it states (internal/doccheck): the rows tied
// to a constant are written from it; the others are examples.
func TestDocNumbers(t *testing.T) {
	n := fmt.Sprint
	tied := [][2]string{
		{"Hedging.Quantile", "from " + n(tail.MinQuantile) + " to " + n(tail.MaxQuantile)},
	}
	facts := [][2]string{
		{"ConfigError", `"destinations[2].backoff.base"`},
		{"Destination.Host", `"api.example.com:8443" matches it on port 8443 only`},
		{"Destination.Host", "80 for http, 443 for https"},
		{"Destination.Host", `"[::1]:8080"`},
		{"Parse", "destinations[2].backoff.base"},
		{"Parse", `("250ms", "2s", "1m30s")`},
		{"Parse", "from 0 (none) to 1"},
	}
	doccheck.CheckNumbers(t, ".", append(tied, facts...))
}
