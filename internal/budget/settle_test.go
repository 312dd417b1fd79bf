package budget

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSettleRecordsTheEndItIsGiven: an outcome whose end is known (the
// transport read it on the budget's clock) is recorded at that time, with
// its latency, without another reading of the clock; one whose end is not
// known is recorded at the budget's time.
func TestSettleRecordsTheEndItIsGiven(t *testing.T) {
	c := newFakeClock()
	b := New(testConfig(), c)
	req := httptest.NewRequest(http.MethodGet, "http://example.test/", nil)
	b.Settle(req, false, true, &Outcome{First: true}, nil) // the host's state, made
	c.advance(time.Second)
	at := b.clock() - int64(100*time.Millisecond) // not now: proves it is not read again
	b.Settle(req, true, true, &Outcome{First: true, Latency: 5 * time.Millisecond, At: at, AtKnown: true}, nil)
	h, ok := b.hosts.Get(hostmap.KeyOf(req))
	require.True(t, ok)
	okN, _, _, minLat := h.stats.recent(b.clock())
	assert.Equal(t, at, h.stats.lastOK.Load())
	assert.Equal(t, 5*time.Millisecond, minLat)
	assert.Equal(t, int64(1), okN)

	c.advance(time.Second)
	b.Settle(req, true, true, &Outcome{}, nil)
	assert.Equal(t, b.clock(), h.stats.lastOK.Load(), "read on the budget's clock")
}
