package retryhttp

import (
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/tail"
)

// AdaptiveHedgeDelay returns the hedge delay that adaptive hedging with
// quantile q would give req now, and whether its host's window is warm.
func AdaptiveHedgeDelay(t *Transport, req *http.Request, q float64) (time.Duration, bool) {
	return t.tails.of(req).Delay(t.clock().Now().UnixNano(), tail.ClampQuantile(q))
}
