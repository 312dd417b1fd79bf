package retryhttp

import (
	"net/http"
	"time"
)

// AdaptiveHedgeDelay returns the hedge delay that adaptive hedging with
// quantile q would give req now, and whether its host's window is warm.
func AdaptiveHedgeDelay(t *Transport, req *http.Request, q float64) (time.Duration, bool) {
	return t.tails.of(req).delay(t.clock().Now().UnixNano(), tailQuantile(q))
}
