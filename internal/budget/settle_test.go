package budget

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	at := b.Now() - int64(100*time.Millisecond) // not now: proves it is not read again
	b.Settle(req, true, true, &Outcome{First: true, Latency: 5 * time.Millisecond, At: at, AtKnown: true}, nil)
	in, ok := b.Inspect(req)
	require.True(t, ok)
	assert.Equal(t, at, in.LastOK)
	assert.Equal(t, 5*time.Millisecond, in.MinLatency)
	assert.Equal(t, int64(1), in.OK)

	c.advance(time.Second)
	b.Settle(req, true, true, &Outcome{}, nil)
	in, _ = b.Inspect(req)
	assert.Equal(t, b.Now(), in.LastOK, "read on the budget's clock")
}
